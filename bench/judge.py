"""Judge check figures: how well each local judge separates supported from unsupported answers, before and after
the empty-judgement fix, side by side.

For each dataset, the same labelled cases (built once; the paraphrases by one fixed model, so separate runs for
separate judges score identical cases) are scored by each model as judge, twice: first with
`evaluation.empty_judgement: exclude` (RAGAS as is: an empty statement list is NaN and drops out, "unscored"), then
with the default `unsupported` (re-asked with minItems 1; what is still empty is scored 0, "empty, scored 0"). Both
runs share one cache per (dataset, model), so the second pays only for the re-asks; seconds per case come from the
first (cold) run. Faithfulness and answer relevancy; one model process at a time.

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
from tuner.evaluation.judge_check import check_judge, make_cases, save_checks
from tuner.evaluation.rag_eval import RagRunner
from tuner.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"demo": None, "amnesty_qa": ROOT.parent / "shared" / "datasets" / "amnesty_qa" / "amnesty_qa.jsonl"}
METRICS = ["faithfulness", "answer_relevancy"]
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def project(model: str, dataset: Path | None, rule: str, cache: Path) -> ProjectConfig:
    return ProjectConfig(generator=LlamaCppConfig(model=model), dataset={"path": dataset}, cache_dir=cache,
                         evaluation=EvaluationConfig(metrics=METRICS, empty_judgement=rule))


def cache(out: Path, name: str, model: str) -> Path:
    """One LLM-call cache per (set, model): its paraphrases, both rules' judgements and any rerun share it."""
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

    table = Table(title=f"judge check: {args.n} questions per set, supported vs unsupported cases")
    for column in ("set", "judge", "rule", "metric", "cases", "AUC", "acc@0.5", "unscored sup/unsup",
                   "empty, scored 0 sup/unsup", "seed agreement", "s/case (cold)", "calls paid"):
        table.add_column(column)
    for name in args.datasets:
        path = DATASETS[name]
        if path is not None and not path.is_file():
            console.print(f"[yellow]skipped {name}: {path} not found[/]")
            continue
        writer_dir = cache(args.out, name, args.paraphraser)
        writer = RagRunner(open_workspace(project(args.paraphraser, path, "unsupported", writer_dir)))
        data = writer.workspace.dataset
        cases = make_cases(writer, data, data.questions, METRICS, args.n)
        console.print(f"{name}: {len(cases)} cases from {args.n} questions")
        for model in args.models:
            cold = {}
            for rule in ("exclude", "unsupported"):
                runner = RagRunner(open_workspace(project(model, path, rule, cache(args.out, name, model))))
                checked = check_judge(runner, cases, args.agreement,
                                      lambda i, c: console.print(f"  {model} {rule} {i + 1}/{len(cases)}", end="\r"))
                save_checks([checked], args.out / f"{name}-{model}-{rule}.json")
                for metric, m in checked.metrics.items():
                    cold.setdefault(metric, m.seconds_per_case)
                    paid = sum(s.paid_calls for s in checked.cases if s.case.metric == metric)
                    table.add_row(name, model, rule, metric, f"{m.supported.cases}/{m.unsupported.cases}",
                                  "—" if m.auc is None else f"{m.auc:.2f}", f"{m.accuracy:.2f}",
                                  f"{m.supported.unscored:.0%}/{m.unsupported.unscored:.0%}",
                                  f"{m.supported.empty:.0%}/{m.unsupported.empty:.0%}",
                                  "—" if m.agreement is None else f"{m.agreement:.0%} of {m.agreement_cases}",
                                  "—" if cold[metric] is None else f"{cold[metric]:.1f}", str(paid))
                console.print(table)
    console.print(table)


if __name__ == "__main__":
    main()
