"""Does a compiled answer program beat the hand-written ones on questions it never saw?

Splits the set by id hash (default 10 train / 10 held out of amnesty_qa's first 20 questions), compiles the
`default` program for faithfulness with each optimizer asked for, then answers the held-out questions with
`default`, `strict` and each compiled program on the same contexts (the config's pipeline) and prints, per
program: faithfulness and answer relevancy (the study's scoring rules: a refusal of an answerable question is 0),
refusal rate, citation rate, the difference from `default` with its paired bootstrap 95 % CI, and the LLM calls
the compile paid. One cache per (set, model) under --out: run again and finished work is read back.

    python bench/compile.py                                   # 1.5B, amnesty_qa 10 + 10, bootstrap
    python bench/compile.py --model qwen2.5-0.5b --optimizers bootstrap gepa --budget 200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.analysis.programs import compare_programs, evaluate_programs
from tuner.compile.optimizers import COMPILERS
from tuner.compile.run import CompileSettings, compile_program
from tuner.config import EvaluationConfig, LlamaCppConfig, ProjectConfig
from tuner.data.split import Split
from tuner.evaluation.rag_eval import RagRunner
from tuner.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[1]
AMNESTY = ROOT.parent / "shared" / "datasets" / "amnesty_qa" / "amnesty_qa.jsonl"
METRICS = ["faithfulness", "answer_relevancy"]
# the table is the result: never squeezed to 80 columns in a log; on this stdout while DSPy's chatter goes to a log
console = Console(width=200, file=sys.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-1.5b", help="generator and judge")
    parser.add_argument("--dataset", type=Path, default=AMNESTY)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--train", type=int, default=10)
    parser.add_argument("--optimizers", nargs="+", default=["bootstrap"], choices=list(COMPILERS))
    parser.add_argument("--budget", type=int, default=300, help="LLM calls per compile (below 240 with 10 training "
                        "questions, bootstrap collects demos without a random search over demo sets)")
    parser.add_argument("--strictness", type=int, default=3, help="questions generated per answer for answer "
                        "relevancy (1 costs a third of the calls)")
    parser.add_argument("--out", type=Path, default=Path("studies/bench-compile"))
    args = parser.parse_args()
    if not args.dataset.is_file():
        raise SystemExit(f"skipped: {args.dataset} not found")

    cache = args.out / f"cache-{args.dataset.stem}-{args.model}"
    project = ProjectConfig(generator=LlamaCppConfig(model=args.model),
                            dataset={"path": args.dataset, "limit": args.questions},
                            cache_dir=cache, evaluation=EvaluationConfig(metrics=METRICS, strictness=args.strictness))
    runner = RagRunner(open_workspace(project))
    questions = runner.workspace.dataset.questions
    split = Split.make([q.id for q in questions], 1 - args.train / len(questions))
    train, held_out = split.search(questions), split.holdout(questions)
    console.print(f"{args.dataset.stem}: {len(train)} train + {len(held_out)} held-out questions, {args.model}")

    programs, spent = {"default": "default", "strict": "strict"}, {}
    for name in args.optimizers:
        compiled = compile_program(runner, project.pipeline, train, held_out,
                                   CompileSettings(name, budget=args.budget), args.out / "programs",
                                   on_score=lambda _: progress(f"  {name}: {runner.meter.paid} calls paid"))
        programs[name] = str(compiled.path)
        spent[name] = compiled.sidecar
        console.print(f"{name}: {compiled.path.name}, {compiled.sidecar.calls} calls "
                      f"({compiled.sidecar.calls_paid} paid in this run), "
                      f"{compiled.sidecar.demos} demo(s), training score {compiled.sidecar.train_score:.3f}")

    results = evaluate_programs(runner, project.pipeline, programs, held_out, METRICS,
                                lambda name, i, stage: progress(f"  {name} {i + 1}/{len(held_out)} {stage}",
                                                                final=stage == "done"))
    table = compare_programs(results, "default", METRICS)
    view = Table(title=f"held-out: {len(held_out)} questions of {args.dataset.stem}, {args.model} generator and judge")
    for column in ("program", "faithfulness", "Δ vs default [95 % CI]", "answer relevancy", "refusals", "citing",
                   "compile calls"):
        view.add_column(column)
    for name, row in table.items():
        versus = row.vs_reference.get("faithfulness")
        delta = "—" if not versus or versus.ci is None else \
            f"{versus.difference:+.3f} [{versus.ci[0]:+.3f}, {versus.ci[1]:+.3f}]"
        view.add_row(name, fmt(row.means["faithfulness"]), delta, fmt(row.means["answer_relevancy"]),
                     f"{row.refusal_rate:.0%}", f"{row.citation_rate:.0%}",
                     str(spent[name].calls) if name in spent else "—")
    console.print(view)


def progress(line: str, final: bool = True) -> None:
    """One line rewritten in place on a terminal; in a log (an overnight run) only the lines that mark progress."""
    if console.is_terminal:
        console.print(line.ljust(60), end="\r")
    elif final:
        console.print(line)


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    main()
