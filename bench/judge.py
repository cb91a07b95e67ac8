"""Judge check figures: how well each local judge separates supported from unsupported answers under each
faithfulness verdict setting, side by side, and what a case costs.

For each dataset the same labelled cases (built once; the paraphrases by one fixed model, so every judge and setting
scores identical cases) are scored by each model as judge under each setting of `VERDICT_SETTINGS`
(tuner/evaluation/judge/check.py): `sampled` (RAGAS's own: statements, then a reason and a 0/1 verdict
each; the judge before this bench), `graded` (the judge's statements, P(yes) per statement from one token) and
`graded, sentences` (the answer's sentences, P(yes) each; the default since this bench chose it). Seconds per case
are on a cold cache (a call the cache answered counts at what it took when it was paid), so settings that share a
call (the judge's statements) are compared fairly; the flip rate is the share of the first `--agreement` cases whose
verdict changes side of 0.5 under two other sampled seeds. The last line per dataset and model is what `tuner judge
check --settings` would say to use. One model process at a time; one LLM-call cache per (dataset, model), so a rerun
pays nothing.

    python bench/judge.py                                   # demo + amnesty_qa, 0.5B and 1.5B, 20 questions
    python bench/judge.py --models qwen2.5-0.5b --datasets demo --n 5

With --labels DEV (a labels file; bench/ragtruth.py builds one from RAGTruth's claims that people labelled) the
cases are those labels instead, judged under each graded setting (contexts joined or each passage alone, the
support or the NLI question) by each model, and by a jury of the models (the mean of their log-odds). Per setting
it prints the AUC with its 95 % bootstrap interval, the balanced accuracy of a cross-validated cut, the cut itself,
the balanced accuracy at 0.5 and seconds per claim (cold), and the AUC per task (where the labels name none, per
source). Claims that share their passages are judged one after another, as a question's verdicts are in a study
(their prefix is computed once).

    python bench/judge.py --labels ~/.cache/tuner/datasets/ragtruth/dev-labels.jsonl

With --align N it runs `tuner judge align`'s cross-validation on the labels instead (two halves, each judged by the
winner of an N-candidate search on the other) and prints held-out AUC and balanced accuracy before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import EvaluationConfig, LlamaCppConfig, ProjectConfig
from tuner.evaluation.judge.agreement import balanced_accuracy
from tuner.evaluation.judge.cases import label_cases, make_cases
from tuner.evaluation.judge.check import VERDICT_SETTINGS, CaseScore, JudgeCheck, check_judge, choose, save_checks
from tuner.evaluation.judge.cut import MIDDLE, setting_name
from tuner.evaluation.labels import read as read_labels
from tuner.evaluation.rag_eval import RagRunner
from tuner.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"demo": None, "amnesty_qa": ROOT.parent / "shared" / "datasets" / "amnesty_qa" / "amnesty_qa.jsonl"}
METRICS = ["faithfulness"]
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def project(model: str, dataset: Path | None, cache: Path, **setting: str) -> ProjectConfig:
    return ProjectConfig(generator=LlamaCppConfig(model=model), dataset={"path": dataset}, cache_dir=cache,
                         evaluation=EvaluationConfig(metrics=METRICS, **setting))


def cache(out: Path, name: str, model: str) -> Path:
    """One LLM-call cache per (set, model): its paraphrases, every setting's judgements and any rerun share it."""
    return out / f"cache-{name}-{model}"


#: the graded settings compared on people's labels (RAGAS's sampled verdicts cost several calls a claim), and the
#: checkers that need no model (the judge's model only counts the tokens a claim's prompt would take)
LABEL_SETTINGS = [s for s in VERDICT_SETTINGS if s.get("statements") == "sentences"] + [
    {"verdicts": "graded", "statements": "sentences", "checker": {"lexical": counted}}
    for counted in ("words", "facts")]


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def sample(cases: list, supported: int | None, claims: int | None = None) -> list:
    """Every unsupported case and `supported` of the supported ones (seeded): AUC and balanced accuracy do not
    depend on how many of each class there are, so the rare class is kept whole and the common one thinned. With
    `claims`, a seeded sample of that many, half of each class (for timing settings side by side on a few); a smaller
    sample is part of a larger one, so its calls are cached with it."""
    if claims is not None:
        def drawn(side: bool) -> list:
            members = [c for c in cases if c.supported == side]
            return random.Random(side).sample(members, len(members))[:claims // 2]
        keep = {c.key for side in (True, False) for c in drawn(side)}
        return [c for c in cases if c.key in keep]
    if supported is None:
        return cases
    keep = set(random.Random(0).sample([c.key for c in cases if c.supported], supported))
    return [c for c in cases if not c.supported or c.key in keep]


def jury(checks: list[JudgeCheck]) -> JudgeCheck:
    """The models' verdicts combined as one judge: each case's score the mean of their log-odds, its seconds
    their sum."""
    scored = []
    for cases in zip(*(c.cases for c in checks)):
        values = [s.value for s in cases]
        value = None if None in values else 1 / (1 + math.exp(-sum(map(logit, values)) / len(values)))
        cold = [s.cold_seconds for s in cases]
        scored.append(CaseScore(cases[0].case, value, next((s.failure for s in cases if s.failure), None),
                                sum(s.seconds for s in cases), 0, 0,
                                cold_seconds=None if None in cold else sum(cold)))
    return JudgeCheck.of(" + ".join(c.judge for c in checks), checks[0].dataset, checks[0].empty_judgement, scored,
                         setting=checks[0].setting)


def constructed_cases(labels, n: int, writer_model: str, out: Path) -> list:
    """The judge check's own cases, built from the development set as from any data: each of `n` supported claims
    (one per set of passages) is a question's reference on its passages, and the check's kinds are made from it
    (the detail of `addition` written by `writer_model`). Scored beside people's labels, they tell how far the
    check's AUC is from the AUC on real answers."""
    from tuner.data import Question
    from tuner.evaluation.judge.cases import ADDITION_PROMPT, HARD_KINDS, Source, build_cases, write

    seen, items = set(), []
    for label in labels.values():
        if label.supported and label.contexts not in seen and len(label.answer.split()) >= 6:
            seen.add(label.contexts)
            items.append(Source(Question(label.question_id, label.question, (label.answer,)), label.contexts))
    items = random.Random(0).sample(items, min(n, len(items)))
    writer = RagRunner(open_workspace(project(writer_model, None, out / f"cache-labels-{writer_model}")))
    kinds = ("reference", "context", "other_answer", "swapped", *HARD_KINDS)
    return build_cases(items, ["faithfulness"], kinds, add_detail=lambda text: write(writer, ADDITION_PROMPT, text))


def _auc(m) -> str:
    return ("—" if m.auc is None else f"{m.auc:.2f}") + (
        "" if m.auc_interval is None else " [{:.2f}, {:.2f}]".format(*m.auc_interval))


def after_answer(model: str, setting: dict, alone: JudgeCheck, cases: list, out: Path) -> JudgeCheck:
    """The claims judged as in a study where `model` also wrote the answer: before each claim's verdicts, its answer
    prompt computed (`answer_first`), so the verdicts resume those passages instead of computing them whole. A cache
    of its own: the verdicts are computed again."""
    runner = RagRunner(open_workspace(project(model, None, out / f"cache-labels-{model}-after-answer", **setting)))

    def step(i: int, case) -> None:
        console.print(f"  {model} {alone.setting}, after its answer {i + 1}/{len(cases)}", end="\r")
        answer_first(runner.judge.inner, case)
    return check_judge(runner, cases, 0, step)


def most_changed(check: JudgeCheck, other: JudgeCheck) -> float:
    """The largest change of a claim's score between two checks of the same claims."""
    def key(score) -> tuple:
        return score.case.question_id, score.case.answer
    theirs = {key(s): s.value for s in other.cases}
    return max((abs(s.value - theirs[key(s)]) for s in check.cases
                if s.value is not None and theirs.get(key(s)) is not None), default=0.0)


def answer_first(llm, case) -> None:
    """What a study's judge meets before a question's verdicts, when it also wrote the answer: the answer prompt
    (`answer_layout: context-first`, the default program) computed, so the verdicts resume its passages. Asked of
    the model itself, past the call cache (a cached answer would compute nothing); one token is enough."""
    from tuner.prompts.programs import BUILTIN_PROGRAMS, ContextFirst
    from tuner.text import number_contexts

    llm.chat(ContextFirst().format(BUILTIN_PROGRAMS["default"], [], {
        "question": case.question, "contexts": number_contexts(list(case.contexts))}), max_tokens=1)


def by_task(check: JudgeCheck, tasks: dict[str, str]) -> str:
    from tuner.evaluation.judge.agreement import auc
    out = []
    for task in sorted(set(tasks.values())):
        mine = [s for s in check.cases if tasks.get(s.case.question_id) == task and s.value is not None]
        value = auc([s.value for s in mine if s.case.supported], [s.value for s in mine if not s.case.supported])
        out.append(f"{task} {'—' if value is None else f'{value:.2f}'}")
    return ", ".join(out)


def against_labels(args) -> None:
    """Each model and the jury under each graded setting, on the claims people labelled."""
    labels = read_labels(args.labels)
    tasks = {}
    for line in args.labels.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        tasks[str(row["question_id"])] = row.get("task") or row.get("source") or "—"
    cases = sorted(sample(label_cases(labels.values()), args.supported, args.claims),
                   key=lambda c: (c.contexts, c.question_id))
    positives = sum(not c.supported for c in cases)
    console.print(f"{args.labels}: {len(cases)} claims, {positives} labelled unsupported")
    table = Table(title=f"faithfulness judge on people's labels: {len(cases)} claims ({positives} unsupported)")
    for column in ("judge", "setting", "AUC [95% CI]", "ΔAUC vs default [paired]", "bal. acc cv", "cut",
                   "bal. acc @0.5", "s/claim (cold)", "AUC by task", "unscored"):
        table.add_column(column)
    wanted = [s for s in LABEL_SETTINGS if not args.settings or setting_name(_evaluation(s)) in args.settings]
    built = constructed_cases(labels, args.constructed, args.models[-1], args.out) if args.constructed else []
    default, constructed, baseline = setting_name(EvaluationConfig()), [], {}
    for setting in wanted:
        checks = []
        for model in args.models:
            runner = RagRunner(open_workspace(project(model, None, args.out / f"cache-labels-{model}", **setting)))
            name = setting_name(runner.workspace.config.evaluation)
            checks.append(check_judge(runner, cases, 0, lambda i, c: console.print(
                f"  {model} {name} {i + 1}/{len(cases)}", end="\r")))
            if built:  # the check's own cases, under each setting run
                own = check_judge(runner, built, 0)
                mine = own.metrics["faithfulness"]
                kinds = ", ".join(f"{k} {v:.2f}" for k, v in mine.by_kind.items() if v is not None)
                constructed.append(f"{model} ({name}): AUC {mine.auc:.2f} on {len(built)} constructed cases "
                                   f"({hard_auc(own):.2f} on the hard kinds alone) against "
                                   f"{checks[-1].metrics['faithfulness'].auc:.2f} on people's labels; "
                                   f"mean score by kind {kinds}")
        names = list(args.models)
        if len(checks) > 1:
            checks.append(jury(checks))
            names.append("jury (mean log-odds)")
        for name, check in zip(names, checks):
            m = check.metrics["faithfulness"]
            if check.setting == default:
                baseline[name] = check
            gain = "—" if name not in baseline or check is baseline[name] else paired_gain(check, baseline[name])
            table.add_row(name, check.setting, _auc(m), gain, _f(m.balanced_accuracy), _f(m.cut),
                          _f(at_middle(check)), _f(m.seconds_per_case, "{:.2f}"), by_task(check, tasks),
                          f"{m.supported.unscored:.0%}/{m.unsupported.unscored:.0%}")
        for model, alone in zip(args.models, checks) if args.after_answer else ():
            after = after_answer(model, setting, alone, cases, args.out)
            m = after.metrics["faithfulness"]
            table.add_row(f"{model}, after its answer", after.setting, _auc(m), paired_gain(after, alone) +
                          f" vs alone; max |Δ| {most_changed(after, alone):.3f}", _f(m.balanced_accuracy),
                          _f(m.cut), _f(at_middle(after)), _f(m.seconds_per_case, "{:.2f}"), by_task(after, tasks),
                          f"{m.supported.unscored:.0%}/{m.unsupported.unscored:.0%}")
        save_checks(checks, args.out / f"labels-{checks[0].setting.replace(', ', '-')}.json")
    console.print(table)
    for line in constructed:
        console.print(line, highlight=False, soft_wrap=True)


def aligned_on_labels(args) -> None:
    """`tuner judge align`'s cross-validation on the development set: does a judge aligned on one half agree better
    with people on the other? Calls are cached with --labels' own, so today's verdicts are not paid again (the
    search on all labels that `tuner judge align` runs after it, to adopt a winner, is left out: it measures
    nothing)."""
    from tuner.evaluation.judge.align import Search, cross_validate, verdicts_needed

    cases = sorted(sample(label_cases(read_labels(args.labels).values()), args.supported, args.claims),
                   key=lambda c: (c.contexts, c.question_id))
    console.print(f"{args.labels}: {len(cases)} claims, {sum(not c.supported for c in cases)} labelled unsupported")
    for model in args.models:
        runner = RagRunner(open_workspace(project(model, None, args.out / f"cache-labels-{model}")))
        started = time.perf_counter()
        def shown(done: int, total: int) -> None:
            console.print(f"  {model} aligning {done}/{total}", end="\r")
        evaluation = runner.workspace.config.evaluation
        search = Search(runner, evaluation, shown, verdicts_needed(len(cases), 2, args.align, adopting=False))
        aligned = cross_validate(search, cases, 2, args.align)
        console.print(f"{model}: {aligned.sentence()} ({time.perf_counter() - started:.0f} s)",
                      highlight=False, soft_wrap=True)


def hard_auc(check: JudgeCheck) -> float | None:
    """AUC of the supported cases against the kinds modelled on real hallucinations only (an added detail, a subtle
    change, one sentence in four)."""
    from tuner.evaluation.judge.agreement import auc
    from tuner.evaluation.judge.cases import HARD_KINDS
    scored = [s for s in check.cases if s.value is not None]
    return auc([s.value for s in scored if s.case.supported],
               [s.value for s in scored if s.case.kind in HARD_KINDS])


def paired_gain(check: JudgeCheck, baseline: JudgeCheck, resamples: int = 2000) -> str:
    """AUC minus the default setting's on the same claims, with a 95 % interval from resampling claims."""
    def scores(c):
        return {(s.case.question_id, s.case.answer): s.value for s in c.cases if s.value is not None}
    supported = {(s.case.question_id, s.case.answer): s.case.supported for s in check.cases}
    return paired_difference(scores(check), scores(baseline), supported, resamples)


def paired_difference(mine: dict, theirs: dict, supported: dict, resamples: int = 2000) -> str:
    """AUC of scores `mine` minus that of `theirs` on the claims both scored (keys into `supported`), with a 95 %
    interval from resampling claims (supported and unsupported apart, seeded): two settings' AUC intervals overlap
    far more than their paired difference varies."""
    from tuner.evaluation.judge.agreement import auc

    keys = [k for k in mine if k in theirs]
    pos, neg = [k for k in keys if supported[k]], [k for k in keys if not supported[k]]
    if not pos or not neg:
        return "—"

    def gain(p, n):
        return auc([mine[k] for k in p], [mine[k] for k in n]) - auc([theirs[k] for k in p], [theirs[k] for k in n])
    rng = random.Random(0)
    draws = sorted(gain(rng.choices(pos, k=len(pos)), rng.choices(neg, k=len(neg))) for _ in range(resamples))
    return f"{gain(pos, neg):+.2f} [{draws[int(0.025 * resamples)]:+.2f}, {draws[int(0.975 * resamples)]:+.2f}]"


def at_middle(check: JudgeCheck) -> float | None:
    """Faithfulness' balanced accuracy with 0.5 as the cut (what every rule read before a cut was measured)."""
    return balanced_accuracy([(s.value, s.case.supported) for s in check.cases if s.case.metric == "faithfulness"],
                             MIDDLE)


def _evaluation(setting):
    return EvaluationConfig(metrics=METRICS, **setting)


def _f(value, pattern="{:.2f}"):
    return "—" if value is None else pattern.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen2.5-0.5b", "qwen2.5-1.5b"])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--paraphraser", default="qwen2.5-1.5b", help="the model that writes the paraphrase cases")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--agreement", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("studies/bench-judge"))
    parser.add_argument("--labels", type=Path, help="judge people's labels (a labels file) instead of built cases")
    parser.add_argument("--supported", type=int, help="with --labels: judge this many of the supported claims (a "
                        "seeded sample) and every unsupported one")
    parser.add_argument("--claims", type=int, help="with --labels: judge a seeded sample of this many claims, half of "
                        "each class (time settings side by side on a few, with a fresh --out for a cold cache)")
    parser.add_argument("--constructed", type=int, default=0, help="with --labels: also build the judge check's own "
                        "cases from this many supported claims and score them under each setting run")
    parser.add_argument("--settings", nargs="+", help="with --labels: only these settings, by name (e.g. "
                        "\"graded, sentences, each passage\")")
    parser.add_argument("--after-answer", action="store_true", help="with --labels: each model's verdicts again, "
                        "each claim's after the judge computed its answer prompt (answer_layout: context-first), as "
                        "in a study where one model answers and judges, beside the verdicts alone")
    parser.add_argument("--align", type=int, metavar="CANDIDATES", help="with --labels: align each model's judge "
                        "(default setting) on the claims in two folds, each half judged by the winner of a search of "
                        "this many candidates on the other half, and print held-out agreement before and after")
    args = parser.parse_args()
    if args.labels is not None:
        return aligned_on_labels(args) if args.align else against_labels(args)

    table = Table(title=f"judge check, faithfulness: {args.n} questions per set, supported vs unsupported cases")
    for column in ("set", "judge", "setting", "cases", "AUC", "acc@0.5", "unscored sup/unsup", "flip rate",
                   "s/case (cold)", "vs sampled", "calls paid"):
        table.add_column(column)
    choices = []
    for name in args.datasets:
        path = DATASETS[name]
        if path is not None and not path.is_file():
            console.print(f"[yellow]skipped {name}: {path} not found[/]")
            continue
        writer = RagRunner(open_workspace(project(args.paraphraser, path, cache(args.out, name, args.paraphraser))))
        data = writer.workspace.dataset
        cases = make_cases(writer, data, data.questions, METRICS, args.n)
        console.print(f"{name}: {len(cases)} cases from {args.n} questions")
        for model in args.models:
            checks = []
            for setting in VERDICT_SETTINGS:
                runner = RagRunner(open_workspace(project(model, path, cache(args.out, name, model), **setting)))
                name = setting_name(runner.workspace.config.evaluation)
                checked = check_judge(runner, cases, args.agreement, lambda i, c: console.print(
                    f"  {model} {name} {i + 1}/{len(cases)}", end="\r"))
                save_checks([checked], args.out / f"{name}-{model}-{checked.setting.replace(', ', '-')}.json")
                checks.append(checked)
                m, today = checked.metrics["faithfulness"], checks[0].metrics["faithfulness"]
                paid = sum(s.paid_calls for s in checked.cases)
                ratio = "—" if None in (m.seconds_per_case, today.seconds_per_case) else \
                    f"{m.seconds_per_case / today.seconds_per_case:.2f}×"
                table.add_row(name, model, checked.setting, f"{m.supported.cases}/{m.unsupported.cases}",
                              "—" if m.auc is None else f"{m.auc:.2f}", f"{m.accuracy:.2f}",
                              f"{m.supported.unscored:.0%}/{m.unsupported.unscored:.0%}",
                              "—" if m.flip_rate is None else f"{m.flip_rate:.0%} of {m.agreement_cases}",
                              "—" if m.seconds_per_case is None else f"{m.seconds_per_case:.1f}", ratio, str(paid))
            chosen = choose(checks)
            if chosen is not None:
                choices.append(f"{name}, {model}: {chosen[1]}")
    console.print(table)
    for line in choices:
        console.print(line, highlight=False, soft_wrap=True)


if __name__ == "__main__":
    main()
