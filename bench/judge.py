"""Judge check figures: how well each local judge separates supported from unsupported answers under each
faithfulness verdict setting, side by side, and what a case costs.

For each dataset the same labelled cases (built once; the paraphrases by one fixed model, so every judge and setting
scores identical cases) are scored by each model as judge under each setting of
`tuner/evaluation/judge_check.VERDICT_SETTINGS`: `sampled` (RAGAS's own: statements, then a reason and a 0/1 verdict
each; the judge before this bench), `graded` (the judge's statements, P(yes) per statement from one token) and
`graded, sentences` (the answer's sentences, P(yes) each; the default since this bench chose it). Seconds per case
are on a cold cache (a call the cache answered counts at what it took when it was paid), so settings that share a
call (the judge's statements) are compared fairly; the flip rate is the share of the first `--agreement` cases whose
verdict changes side of 0.5 under two other sampled seeds. The last line per dataset and model is what `tuner judge
check --settings` would say to use. One model process at a time; one LLM-call cache per (dataset, model), so a rerun
pays nothing.

    python bench/judge.py                                   # demo + amnesty_qa, 0.5B and 1.5B, 20 questions
    python bench/judge.py --models qwen2.5-0.5b --datasets demo --n 5
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import EvaluationConfig, LlamaCppConfig, ProjectConfig
from tuner.evaluation.judge_check import VERDICT_SETTINGS, check_judge, choose, make_cases, save_checks, setting_name
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen2.5-0.5b", "qwen2.5-1.5b"])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--paraphraser", default="qwen2.5-1.5b", help="the model that writes the paraphrase cases")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--agreement", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("studies/bench-judge"))
    args = parser.parse_args()

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
