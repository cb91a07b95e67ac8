"""The regression gate of `tuner compare`: a new configuration against a base one, question by question.

A gate on two single runs of a noisy judge flips from run to run; this one fails only when the paired bootstrap CI
of the difference excludes zero and the mean loss exceeds the margin the team tolerates. With human labels of the
answers (`--labels`), faithfulness is gated on its PPI-corrected difference (tuner/analysis/corrections.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.analysis.corrections import Corrections, corrections, reading
from tuner.analysis.ppi import Corrected
from tuner.analysis.stats import Comparison, compare, per_question
from tuner.evaluation.judge.cut import MIDDLE
from tuner.evaluation.labels import LABELLED_METRIC, Label
from tuner.evaluation.records import EvalResult
from tuner.metrics import lower_is_better


@dataclass(frozen=True)
class Gate:
    margin: float
    comparisons: tuple[Comparison, ...]
    corrections: Corrections | None = None  # faithfulness corrected by human labels; None: no label applies

    def corrected(self, comparison: Comparison) -> Corrected | None:
        """The labels' difference for this metric, which the gate reads instead of the judge's."""
        if comparison.metric != LABELLED_METRIC or self.corrections is None:
            return None
        return self.corrections.difference

    def verdict(self, comparison: Comparison) -> str:
        fixed = self.corrected(comparison)
        return comparison.verdict if fixed is None else reading(fixed)

    def regressed(self, comparison: Comparison) -> bool:
        """Worse beyond the margin (in the metric's units), with the CI of the difference excluding zero."""
        fixed = self.corrected(comparison)
        difference = comparison.mean_difference if fixed is None else fixed.estimate
        if difference is None:  # no question scored on both sides: nothing to call a regression
            return False
        loss = difference if lower_is_better(comparison.metric) else -difference
        return self.verdict(comparison) == "worse" and loss > self.margin

    @property
    def failed(self) -> tuple[Comparison, ...]:
        return tuple(c for c in self.comparisons if self.regressed(c))

    @property
    def unmeasured(self) -> tuple[Comparison, ...]:
        """Metrics scored on no question of both runs: the gate cannot pass on no data."""
        return tuple(c for c in self.comparisons if c.mean_difference is None and self.corrected(c) is None)

    def reading(self, comparison: Comparison) -> str:
        """One word on a metric: what the gate makes of it."""
        if self.regressed(comparison):
            return f"regression (beyond the margin {self.margin:g})"
        said = self.verdict(comparison)
        by_labels = " (by the labels)" if self.corrected(comparison) is not None else ""
        if said == "worse":
            return f"worse, within the margin {self.margin:g}{by_labels}"
        return {"better": "better", "no difference": "no difference", "no data": "no data"}.get(
            said, "undecided: could be luck") + by_labels

    def to_json(self, base: str, new: str, questions: int) -> dict[str, Any]:
        return {
            "base": base, "new": new, "questions": questions, "margin": self.margin, "regression": bool(self.failed),
            "no_data": [c.metric for c in self.unmeasured],
            "metrics": [{"metric": c.metric, "base": c.reference_mean, "new": c.candidate_mean,
                         "difference": c.mean_difference, "ci95": list(c.ci) if c.ci else None, "wilcoxon_p": c.p,
                         "questions": c.n, "unpaired": c.unpaired, "verdict": c.verdict,
                         "regression": self.regressed(c), **self._corrected_json(c)} for c in self.comparisons],
        }

    def _corrected_json(self, comparison: Comparison) -> dict[str, Any]:
        fixed = self.corrected(comparison)
        if fixed is None:
            return {}
        agreement = self.corrections.agreement
        return {"corrected": {"difference": fixed.estimate, "ci95": list(fixed.ci),
                              "labelled_questions": fixed.labelled, "labels": self.corrections.labels,
                              "judge_accuracy": agreement.accuracy if agreement else None,
                              "judge_bias": agreement.bias if agreement else None}}


def gate(metrics: Sequence[str], base: EvalResult, new: EvalResult, margin: float,
         labels: Mapping[str, Label] | None = None, read_at: float = MIDDLE) -> Gate:
    """`new` against `base` on each metric, paired by question (both must have answered the same questions);
    `labels`: people's verdicts on answers, which correct faithfulness; `read_at`: the judge's cut."""
    fixed = corrections(base, new, labels, names=("BASE", "NEW"), read_at=read_at) if labels else None
    return Gate(margin, tuple(compare(m, per_question(base, m), per_question(new, m)) for m in metrics), fixed)
