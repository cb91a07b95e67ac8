"""The held-out verdict of a real study, as the judge gives it and as labels correct it (PPI), side by side.

No person labels here: a script does, with a rule derived from the judge check's cases, whose truth is known by
construction (an answer built from its own contexts is supported; another question's answer, or the answer with
its names and numbers swapped, is not). The rule: an answer is supported when every number and name it states
appears in its contexts and most of its content words do. Its accuracy is measured first, on those known cases of
the same dataset; then it labels the held-out answers of the study's best trial and baseline on a share of the
held-out questions (drawn as `tuner judge label` draws them), and the verdict is read with and without the labels.
The rule's labels on every held-out question give the figure the correction aims at.

    tuner optimize -c project.yaml --search-space space.yaml --holdout 0.5 --study amnesty15 ...
    tuner best --study amnesty15 --verdict
    python bench/labels.py --studies-dir studies --study amnesty15 --share 0.6
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.analysis.corrections import corrections
from tuner.analysis.labelling import answers_to_label
from tuner.analysis.verdict import verdict
from tuner.data import load_dataset
from tuner.evaluation.judge.cases import _NUMBER, build_cases, names, sources
from tuner.evaluation.labels import LABELS_FILE, Label
from tuner.study.results import read_study
from tuner.study.storage import study_folder

console = Console(width=200)
KNOWN_KINDS = ("reference", "context", "other_answer", "swapped")
#: share of an answer's content words its contexts must hold
COVERED = 0.7


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}", text.lower())}


def rule_supported(answer: str, contexts: tuple[str, ...]) -> bool:
    """Numbers and names all in the contexts, and most content words."""
    answer = re.sub(r"\[\d+\]", "", answer)
    source = " ".join(contexts)
    lowered = source.lower()
    if any(number not in source for number in _NUMBER.findall(answer)):
        return False
    if any(name.lower() not in lowered for name in names(answer)):
        return False
    content = words(answer)
    return not content or len(content & words(source)) / len(content) >= COVERED


def rule_accuracy(dataset_path: Path) -> tuple[int, dict[str, float]]:
    """The rule on the judge check's known cases of the dataset (no paraphrase: no model needed)."""
    data = load_dataset(dataset_path)
    cases = build_cases(sources(data, data.questions, len(data.questions)), ["faithfulness"], KNOWN_KINDS)
    by_kind: dict[str, list[bool]] = {}
    for case in cases:
        by_kind.setdefault(case.kind, []).append(rule_supported(case.answer, case.contexts) == case.supported)
    return len(cases), {kind: sum(right) / len(right) for kind, right in by_kind.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies-dir", type=Path, default=Path("studies"))
    parser.add_argument("--study", required=True)
    parser.add_argument("--share", type=float, default=0.6, help="share of held-out questions labelled")
    args = parser.parse_args()

    source = study_folder(args.studies_dir, args.study)
    with tempfile.TemporaryDirectory() as scratch:  # the study's own labels are never touched
        shutil.copytree(source.root, Path(scratch) / args.study)
        folder = study_folder(Path(scratch), args.study)
        (folder.root / LABELS_FILE).unlink(missing_ok=True)
        view = read_study(folder)
        judged = verdict(view)
        if judged is None or not judged.held_out:
            raise SystemExit(f"study {args.study}: run `tuner best --study {args.study} --verdict` first")
        dataset = Path(view.project.dataset.path)
        cases, accuracy = rule_accuracy(dataset)
        console.print(f"labelling rule on {cases} judge-check cases of {dataset.name} (truth known by construction): "
                      + ", ".join(f"{kind} {share:.0%}" for kind, share in accuracy.items()), highlight=False)

        every = answers_to_label(view, 10 ** 6)
        truth = {item.key: rule_supported(item.result.answer, item.result.contexts) for item in every}
        questions = list(dict.fromkeys(item.result.id for item in every))
        labelled = set(questions[:max(1, round(args.share * len(questions)))])
        for item in every:
            if item.result.id in labelled:
                folder.add_label(Label.of(item.result, truth[item.key], item.trials[0]))
        fixed = verdict(read_study(folder))
        all_labels = {item.key: Label.of(item.result, truth[item.key], item.trials[0]) for item in every}
        target = corrections(view.baseline.held_out, view.best.held_out, all_labels)

    head, corrected = judged.headline, fixed.corrections
    table = Table(title=f"{args.study}: trial {judged.best.number} − baseline on {len(questions)} held-out "
                        f"questions, faithfulness")
    for column in ("figure", "difference", "95 % CI", "questions", "reading"):
        table.add_column(column, justify="left" if column in ("figure", "reading") else "right")
    table.add_row("judge alone (bootstrap)", f"{head.mean_difference:+.3f}", f"[{head.ci[0]:+.3f}, {head.ci[1]:+.3f}]",
                  str(head.n), head.verdict)
    for name, result in (("PPI-corrected", corrected), ("rule's labels on every question", target)):
        d = result.difference if result else None
        if d is None:
            table.add_row(name, "—", "—", "—", "too few labelled questions")
        else:
            table.add_row(name, f"{d.estimate:+.3f}", f"[{d.ci[0]:+.3f}, {d.ci[1]:+.3f}]",
                          f"{d.labelled} labelled of {d.judged}", "better" if d.ci[0] > 0 else
                          "worse" if d.ci[1] < 0 else "undecided")
    console.print(table)
    if corrected and corrected.agreement:
        console.print(f"judge vs labels: {corrected.agreement.sentence()}", highlight=False)
    console.print(fixed.sentence(), highlight=False, soft_wrap=True)


if __name__ == "__main__":
    main()
