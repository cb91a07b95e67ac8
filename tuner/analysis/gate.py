"""The regression gate of `tuner compare`: a new configuration against a base one, question by question.

A gate on two single runs of a noisy judge flips from run to run; this one fails only when the paired bootstrap CI
of the difference excludes zero and the mean loss exceeds the margin the team tolerates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.analysis.stats import Comparison, compare, per_question
from tuner.evaluation.records import EvalResult, lower_is_better


@dataclass(frozen=True)
class Gate:
    margin: float
    comparisons: tuple[Comparison, ...]

    def regressed(self, comparison: Comparison) -> bool:
        """Worse beyond the margin (in the metric's units), with the CI of the difference excluding zero."""
        loss = comparison.mean_difference if lower_is_better(comparison.metric) else -comparison.mean_difference
        return comparison.verdict == "worse" and loss > self.margin

    @property
    def failed(self) -> tuple[Comparison, ...]:
        return tuple(c for c in self.comparisons if self.regressed(c))

    def reading(self, comparison: Comparison) -> str:
        """One word on a metric: what the gate makes of it."""
        if self.regressed(comparison):
            return f"regression (beyond the margin {self.margin:g})"
        if comparison.verdict == "worse":
            return f"worse, within the margin {self.margin:g}"
        return {"better": "better", "no difference": "no difference", "no data": "no data"}.get(
            comparison.verdict, "undecided: could be luck")

    def to_json(self, base: str, new: str, questions: int) -> dict[str, Any]:
        return {
            "base": base, "new": new, "questions": questions, "margin": self.margin, "regression": bool(self.failed),
            "metrics": [{"metric": c.metric, "base": c.reference_mean, "new": c.candidate_mean,
                         "difference": c.mean_difference, "ci95": list(c.ci) if c.ci else None, "wilcoxon_p": c.p,
                         "questions": c.n, "unpaired": c.unpaired, "verdict": c.verdict,
                         "regression": self.regressed(c)} for c in self.comparisons],
        }


def gate(metrics: Sequence[str], base: EvalResult, new: EvalResult, margin: float) -> Gate:
    """`new` against `base` on each metric, paired by question (both must have answered the same questions)."""
    return Gate(margin, tuple(compare(m, per_question(base, m), per_question(new, m)) for m in metrics))
