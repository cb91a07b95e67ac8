"""In-sample vs held-out gain: a retrieval-target study on each shared BEIR-layout set, then its verdict.

Each study tunes `--target` (default ndcg@10, the BEIR measure: recall@5 sits at 1.0 on the smaller sets) over
search_spaces/retrieval.yaml with TPE on the search questions (70 %), then scores the best trial and the baseline
on the held-out 30 %. It prints, per set, the best − baseline difference with its paired bootstrap 95 % CI
in-sample and held-out: how much of the gain the search reports survives on questions it never saw. No LLM is
loaded (retrieval targets generate no answer).

Studies are ordinary resumable studies under --studies (one embedding cache per set, shared by every target):
run again, and finished ones are only read back.

    python bench/verdict.py                                  # 30 trials per set, ndcg@10
    python bench/verdict.py --trials 40 --target recall@5 --studies /tmp/verdict
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.analysis.verdict import give_verdict, verdict
from tuner.config import ProjectConfig
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec
from tuner.study.space import resolve_space

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
SPACE = ROOT / "search_spaces" / "retrieval.yaml"
#: the BEIR-layout sets, with a question limit where the full set makes a trial slow (cmu_qa: 2,462 questions)
SETS = {"squad2_dev_normans": None, "clapnq_dev": None, "vaswani_npl": None, "cmu_qa_wikipedia_v1.2": 800}
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def ci(comparison) -> str:
    if comparison is None or comparison.ci is None:
        return "—"
    return f"{comparison.mean_difference:+.3f} [{comparison.ci[0]:+.3f}, {comparison.ci[1]:+.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--target", default="ndcg@10")
    parser.add_argument("--studies", type=Path, default=Path("studies"))
    parser.add_argument("--space", default=str(SPACE), help="search space file or name (default: retrieval)")
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="which of the BEIR-layout sets")
    parser.add_argument("--prune-after", type=int, default=None,
                        help="questions a trial answers before the pruner may stop it (default as tuner optimize's: "
                             "no pruning for a retrieval target)")
    args = parser.parse_args()
    space = resolve_space(args.space)

    table = Table(title=f"{args.target}: best − baseline, in-sample vs held-out (TPE, {args.trials} trials, "
                        f"{space.name})")
    for column in ("set", "questions (search + held-out)", "best trial", "baseline → best in-sample",
                   "in-sample Δ [95 % CI]", "baseline → best held-out", "held-out Δ [95 % CI]", "reading"):
        table.add_column(column)
    for name in args.sets:
        limit = SETS.get(name)
        if not (DATASETS / name).is_dir():
            console.print(f"[yellow]skipped {name}: not in {DATASETS}[/]")
            continue
        study = f"{args.target.replace('@', '')}-{name}" + ("" if space.stem == "retrieval" else f"-{space.stem}") \
            + ("" if args.prune_after is None else f"-p{args.prune_after}")
        spec = StudySpec(study, StudySettings([args.target], prune_after=args.prune_after), space,
                         ProjectConfig(), DATASETS / name, limit, studies_dir=args.studies,
                         cache_dir=args.studies / f".cache-{name}")
        console.print(f"{name}: study {spec.name}", highlight=False)
        session = Session.open(spec)
        session.run(args.trials)
        judged = verdict(give_verdict(read_study(session.folder), session.runner()))
        if judged is None:
            table.add_row(name, "", "no best vs baseline", *[""] * 5)
            continue
        seen, held = judged.in_sample, judged.headline
        table.add_row(name, f"{len(session.search_questions)} + {len(session.split.holdout_ids)}",
                      str(judged.best.number),
                      f"{seen.reference_mean:.3f} → {seen.candidate_mean:.3f}" if seen.ci else "—", ci(seen),
                      f"{held.reference_mean:.3f} → {held.candidate_mean:.3f}" if held and held.ci else "—", ci(held),
                      "baseline stayed best" if judged.best.number == judged.baseline.number else
                      "holds" if judged.holds else held.verdict if held else "not judged")
    console.print(table)


if __name__ == "__main__":
    main()
