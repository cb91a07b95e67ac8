"""Answer programs compared on the same questions and contexts: what a compile is judged by.

Each program's evaluation (scored through the study's own rules: a refusal of an answerable question is 0)
is summarised — the metric means, how often it refused, how often it cited a context — and compared with the
reference program question by question (paired bootstrap 95 % CI).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tuner.analysis.stats import compare, per_question
from tuner.compile.saved import write_sidecar
from tuner.config import PipelineConfig
from tuner.data import Question
from tuner.evaluation.records import EvalResult

#: (program name, question index, stage) while programs are evaluated
ProgramProgress = Callable[[str, int, str], None]


def summarise_program(result: EvalResult, metrics: Sequence[str]) -> dict[str, Any]:
    answered = len(result.questions) or 1
    return {
        "questions": len(result.questions),
        **{m: result.value(m) for m in metrics},
        "refusal_rate": result.refusals / answered,
        "citation_rate": sum(bool(q.citations) for q in result.questions) / answered,
        "llm_calls": result.cost.llm_calls,
    }


def compare_programs(results: Mapping[str, EvalResult], reference: str, metrics: Sequence[str]) -> dict[str, Any]:
    """{program: summary, with `vs_reference`: {metric: difference and CI}} for every program in `results`."""
    table = {}
    for name, result in results.items():
        row = summarise_program(result, metrics)
        if name != reference:
            row["vs_reference"] = {}
            for metric in metrics:
                c = compare(metric, per_question(results[reference], metric), per_question(result, metric))
                row["vs_reference"][metric] = {"difference": c.mean_difference, "ci": c.ci, "n": c.n,
                                               "verdict": c.verdict, "sentence": c.sentence(name, reference)}
        table[name] = row
    return table


def evaluate_programs(runner, pipeline: PipelineConfig, programs: Mapping[str, str], questions: Sequence[Question],
                      metrics: Sequence[str], on_progress: ProgramProgress | None = None) -> dict[str, EvalResult]:
    """Each program (name -> spec) answering the same questions from the same retrieval."""
    results = {}
    for name, spec in programs.items():
        results[name] = runner.evaluate(pipeline.model_copy(update={"program": spec}), questions, metrics,
                                        on_progress=lambda i, _q, stage, name=name: on_progress and on_progress(
                                            name, i, stage))
    return results


def judge_compiled(runner, pipeline: PipelineConfig, compiled, held_out: Sequence[Question], settings,
                   on_progress: ProgramProgress | None = None) -> dict[str, Any]:
    """A compiled program against the one it started from, on held-out questions (the same contexts); the table
    goes into its sidecar, where reports and a study's program choices read it."""
    start = pipeline.program
    results = evaluate_programs(runner, pipeline, {start: start, "compiled": str(compiled.path)}, held_out,
                                settings.metrics, on_progress)
    table = compare_programs(results, start, settings.metrics)
    compiled.sidecar["held_out"] = table
    write_sidecar(compiled.path, compiled.sidecar)
    return table
