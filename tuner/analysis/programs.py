"""Answer programs compared on the same questions and contexts: what a compile is judged by.

Each program's evaluation (scored through the study's own rules: a refusal of an answerable question is 0)
is summarised — the metric means, how often it refused, how often it cited a context — and compared with the
reference program question by question (paired bootstrap 95 % CI).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.analysis.stats import compare, per_question
from tuner.evaluation.records import EvalResult


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
