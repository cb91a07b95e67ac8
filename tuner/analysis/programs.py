"""Answer programs compared on the same questions and contexts: what a compile is judged by.

Each program's evaluation (scored through the study's own rules: a refusal of an answerable question is 0)
is summarised — the metric means, how often it refused, how often it cited a context — and compared with the
reference program question by question (paired bootstrap 95 % CI).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tuner.analysis.stats import compare, per_question
from tuner.compile.saved import ProgramRow, Versus, write_sidecar
from tuner.config import PipelineConfig
from tuner.data import Question
from tuner.evaluation.records import EvalResult

#: (program name, question index, stage) while programs are evaluated
ProgramProgress = Callable[[str, int, str], None]


def compare_programs(results: Mapping[str, EvalResult], reference: str,
                     metrics: Sequence[str]) -> dict[str, ProgramRow]:
    """Every program in `results` summarised, each but `reference` compared with it metric by metric."""
    table = {}
    for name, result in results.items():
        answered = len(result.questions) or 1
        versus = {}
        for metric in metrics if name != reference else ():
            c = compare(metric, per_question(results[reference], metric), per_question(result, metric))
            versus[metric] = Versus(c.mean_difference, c.ci, c.n, c.verdict, c.sentence(name, reference))
        table[name] = ProgramRow(len(result.questions), {m: result.value(m) for m in metrics},
                                 result.refusals / answered,
                                 sum(bool(q.citations) for q in result.questions) / answered,
                                 result.cost.llm_calls, versus)
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
                   on_progress: ProgramProgress | None = None) -> dict[str, ProgramRow]:
    """A compiled program against the one it started from, on held-out questions (the same contexts); the table
    goes into its sidecar, where reports and a study's program choices read it."""
    start = pipeline.program
    results = evaluate_programs(runner, pipeline, {start: start, "compiled": str(compiled.path)}, held_out,
                                settings.metrics, on_progress)
    table = compare_programs(results, start, settings.metrics)
    compiled.sidecar = compiled.sidecar.judged(table)
    write_sidecar(compiled.path, compiled.sidecar)
    return table
