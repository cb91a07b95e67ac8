"""Evaluation cost benchmark: the 0.5B and 1.5B models generating and judging 5 amnesty_qa questions.

    python bench/eval.py                  # both models, 5 questions, top_k 3
    python bench/eval.py --models qwen2.5-0.5b --questions 2
    python bench/eval.py --models qwen2.5-1.5b --cache-dir /tmp/b15   # keep the cache: a later
        # `tuner eval -d amnesty_qa --limit 5 --set top_k=3` with cache_dir /tmp/b15 then costs 0 LLM calls

Per model, a cold run into a fresh cache, then the same evaluation again (every call a cache hit). Prints
seconds and LLM calls per question for each stage (generate + the four RAGAS metrics), tokens/s, and the
cache-hit rerun time side by side. Figures are printed, never asserted: record them in docs/performance.md.

`--profile` splits every in-process call into prompt evaluation, decoding and the rest (sampling with the JSON
grammar, detokenising, Python) from llama.cpp's own counters, per prompt kind (the RAGAS prompt's schema), with the
share of prompt tokens reused from the previous call's KV cache; then replays the judge prompts with free decoding
(no grammar) so the two are compared per token on the same prompts.

    python bench/eval.py --models qwen2.5-1.5b --profile

`--compare` judges the same answers twice in one run, with `decoding: plain` (llama-cpp-python's own) and
`decoding: fast` (tuner/models/llms/_llama_decoding.py), each into an empty cache: seconds per question per metric,
their ratio, and how many verdicts agree.

    python bench/eval.py --models qwen2.5-1.5b --compare
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import LlamaCppConfig, PipelineConfig, ProjectConfig
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.llms import make_llm
from tuner.models.llms._llama_cpp import CallProfile
from tuner.workspace import open_workspace

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
STAGES = ("generate", "faithfulness", "answer_relevancy", "context_precision", "context_recall")
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def bench(model: str, questions: int, top_k: int, keep: Path | None,
          profile: Table | None = None) -> tuple[list[list[str]], list[str]]:
    with tempfile.TemporaryDirectory() as scratch:
        cache = keep / model if keep else Path(scratch)
        if cache.exists() and any(cache.iterdir()):
            raise SystemExit(f"{cache} is not empty: the cold run needs an empty cache")
        project = ProjectConfig(cache_dir=cache, generator=LlamaCppConfig(model=model),
                                pipeline=PipelineConfig(top_k=top_k))
        runner = RagRunner(open_workspace(project, DATASETS / "amnesty_qa", questions))
        llm, asked = make_llm(project.generator), []
        if profile is not None:
            llm.profile = []
            chat = llm._chat
            llm._chat = lambda messages, **kw: asked.append((messages, kw)) or chat(messages, **kw)
        cold = runner.evaluate(project.pipeline)
        if profile is not None:
            add_profile(profile, model, llm, asked)
        started = time.perf_counter()
        warm = runner.evaluate(project.pipeline)
        rerun = time.perf_counter() - started
    n = len(cold.questions)
    rows = []
    for stage in STAGES:
        cost = cold.cost_by_stage.get(stage)
        if cost:
            rows.append([model, stage, f"{cost.seconds / n:.1f}", f"{cost.llm_calls / n:.1f}", f"{cost.tokens / n:.0f}",
                         f"{cold.metrics.get(stage, float('nan')) if stage != 'generate' else float('nan'):.3f}"])
    total = cold.cost
    model_seconds = sum(c.model_seconds for c in cold.cost_by_stage.values())
    summary = [
        model, str(n), f"{total.seconds:.0f}", f"{total.seconds / n:.1f}", str(total.llm_calls),
        f"{total.tokens / model_seconds:.0f}",
        f"{rerun:.2f}", str(warm.cost.llm_calls), str(warm.cost.cache_hits),
        str(sum(sum(v.values()) for v in cold.failures.values())),
    ]
    return rows, summary


def add_profile(table: Table, model: str, llm, asked: list) -> None:
    """Rows per prompt kind for the recorded calls, then the judge prompts replayed with free decoding."""
    grammar = llm.profile
    llm.profile = []
    for messages, kw in list(asked):
        if kw["json_schema"] is not None:  # the class's own method: the instance's is the recording one
            type(llm)._chat(llm, messages, **{**kw, "json_schema": None})
    judged = [g for g in grammar if g.kind != "free text"]
    free = [replace(p, kind=f"{j.kind}, free decoding") for j, p in zip(judged, llm.profile)]
    llm.profile = None
    kinds: dict[str, list[CallProfile]] = {}
    for call in grammar + free:
        kinds.setdefault(call.kind, []).append(call)
    for kind, calls in sorted(kinds.items()):
        n = len(calls)
        prompt, evaluated = sum(c.prompt_tokens for c in calls), sum(c.evaluated for c in calls)
        completion = sum(c.completion_tokens for c in calls)
        prompt_s, decode_s = sum(c.prompt_seconds for c in calls), sum(c.decode_seconds for c in calls)
        other_s, wall_s = sum(c.other_seconds for c in calls), sum(c.wall_seconds for c in calls)
        table.add_row(model, kind, str(n), f"{prompt / n:.0f}", f"{1 - evaluated / max(1, prompt):.0%}",
                      f"{completion / n:.0f}", f"{evaluated / max(prompt_s, 1e-9):.0f}",
                      f"{completion / max(decode_s, 1e-9):.1f}", f"{1000 * other_s / max(1, completion):.1f}",
                      f"{prompt_s / n:.1f} / {decode_s / n:.1f} / {other_s / n:.1f}", f"{wall_s / n:.1f}")


def compare(model: str, questions: int, top_k: int, table: Table) -> None:
    """Answers once, then the judge with plain and with fast decoding on those same answers (the judge is its own
    model instance in both runs: the answers come from the cache the second time)."""
    with tempfile.TemporaryDirectory() as scratch:
        results = {}
        for decoding in ("plain", "fast"):
            project = ProjectConfig(cache_dir=Path(scratch), generator=LlamaCppConfig(model=model),
                                    judge=LlamaCppConfig(model=model, decoding=decoding),
                                    pipeline=PipelineConfig(top_k=top_k))
            runner = RagRunner(open_workspace(project, DATASETS / "amnesty_qa", questions))
            results[decoding] = runner.evaluate(project.pipeline)  # the answers: paid once, then from the cache
    plain, fast = results["plain"], results["fast"]
    n = len(plain.questions)
    for metric in (*STAGES[1:], "judge"):
        stages = STAGES[1:] if metric == "judge" else (metric,)
        seconds = [sum(r.cost_by_stage[s].seconds for s in stages if s in r.cost_by_stage) for r in (plain, fast)]
        calls = [sum(r.cost_by_stage[s].llm_calls for s in stages if s in r.cost_by_stage) for r in (plain, fast)]
        pairs = [(a.value(s), b.value(s)) for s in stages for a, b in zip(plain.questions, fast.questions)]
        agree = sum(a == b or (a is not None and b is not None and abs(a - b) < 1e-6) for a, b in pairs)
        means = [r.metrics.get(metric) for r in (plain, fast)]
        if metric != "judge":
            for question, (a, b) in zip(plain.questions, pairs):
                if not (a == b or (a is not None and b is not None and abs(a - b) < 1e-6)):
                    table.caption = (table.caption or "verdicts that differ (plain -> fast):") + \
                        f"\n{question.id} {metric}: {a} -> {b}"
        table.add_row(model, metric, f"{seconds[0] / n:.1f}", f"{seconds[1] / n:.1f}",
                      f"{seconds[1] / max(seconds[0], 1e-9):.2f}", f"{calls[0] / n:.1f} / {calls[1] / n:.1f}",
                      " / ".join("-" if m is None else f"{m:.3f}" for m in means), f"{agree}/{len(pairs)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="qwen2.5-0.5b,qwen2.5-1.5b")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--top-k", type=int, default=3, help="contexts per answer (context precision: 1 call each)")
    parser.add_argument("--cache-dir", type=Path, help="keep each model's cache in DIR/MODEL (default: a temp dir)")
    parser.add_argument("--profile", action="store_true", help="split each call's time into phases (see above)")
    parser.add_argument("--compare", action="store_true", help="judge with plain vs fast decoding (see above)")
    args = parser.parse_args()
    if not (DATASETS / "amnesty_qa").is_dir():
        console.print(f"amnesty_qa not found under {DATASETS}")
        return 1
    if args.compare:
        table = Table(title=f"judge decoding, plain vs fast: the same {args.questions} amnesty_qa answers, cold "
                            f"caches, top_k {args.top_k}")
        for column in ("model", "metric", "plain s/q", "fast s/q", "fast / plain", "LLM calls/q", "mean score",
                       "same verdict"):
            table.add_column(column, justify="left" if column in ("model", "metric") else "right")
        for model in args.models.split(","):
            compare(model.strip(), args.questions, args.top_k, table)
        console.print(table)
        return 0
    stages = Table(title=f"per question, cold cache ({args.questions} amnesty_qa questions, top_k {args.top_k})")
    for column in ("model", "stage", "seconds/q", "LLM calls/q", "tokens/q", "mean score"):
        stages.add_column(column, justify="right")
    totals = Table(title="totals: cold run vs cache-hit rerun")
    for column in ("model", "questions", "cold s", "s/question", "LLM calls", "tokens/s in model",
                   "rerun s", "rerun LLM calls", "rerun cache hits", "failures"):
        totals.add_column(column, justify="right")
    profile = None
    if args.profile:
        profile = Table(title="where each call's time goes (llama.cpp counters; 'free decoding': the same judge "
                              "prompts replayed without the JSON grammar)")
        for column in ("model", "prompt kind", "calls", "prompt tok/call", "prefix reused", "completion tok/call",
                       "prompt eval tok/s", "decode tok/s", "other ms/token", "s/call prompt / decode / other",
                       "s/call"):
            profile.add_column(column, justify="left" if column in ("model", "prompt kind") else "right")
    for model in args.models.split(","):
        rows, summary = bench(model.strip(), args.questions, args.top_k, args.cache_dir, profile)
        for row in rows:
            stages.add_row(*row)
        totals.add_row(*summary)
    console.print(stages)
    console.print(totals)
    if profile is not None:
        console.print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
