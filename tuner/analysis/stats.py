"""Paired comparisons of two configurations on the same questions: bootstrap CI, Wilcoxon p, a sentence.

A gain tuner prints must say whether it could be luck. Both configurations answered the same questions, so
the unit of evidence is the per-question difference: its mean, a seeded percentile bootstrap 95 % interval of
that mean, and the Wilcoxon signed-rank p-value. Questions either configuration left unscored are left out
and counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tuner.evaluation.records import EvalResult
from tuner.metrics import RETRIEVAL_METRICS, lower_is_better

RESAMPLES = 10_000
LEVEL = 0.95


def paired_bootstrap_ci(differences: Sequence[float], resamples: int = RESAMPLES, seed: int = 0,
                        level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean difference: questions resampled with replacement."""
    diffs = np.asarray(differences, dtype=float)
    if diffs.size == 0:
        raise ValueError("no paired differences")
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, diffs.size, size=(resamples, diffs.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def wilcoxon_p(differences: Sequence[float]) -> float:
    """Two-sided signed-rank p-value; 1.0 when every difference is zero (nothing to rank)."""
    from scipy.stats import wilcoxon

    diffs = np.asarray(differences, dtype=float)
    if diffs.size == 0 or not np.any(diffs):
        return 1.0
    return float(wilcoxon(diffs, zero_method="wilcox").pvalue)


@dataclass(frozen=True)
class Comparison:
    """`candidate` against `reference` on one metric, paired by question."""

    metric: str
    n: int  # questions scored for both
    unpaired: int  # questions left out: scored by one of the two only
    reference_mean: float | None
    candidate_mean: float | None
    mean_difference: float | None
    ci: tuple[float, float] | None
    p: float | None
    differences: Mapping[str, float]  # question id -> candidate - reference

    @property
    def verdict(self) -> str:
        """better | worse | no difference | undecided | no data (for a cost, lower is better)"""
        if self.ci is None:
            return "no data"
        higher, lower = ("worse", "better") if lower_is_better(self.metric) else ("better", "worse")
        if self.ci[0] > 0:
            return higher
        if self.ci[1] < 0:
            return lower
        if self.ci == (0.0, 0.0):
            return "no difference"
        return "undecided"

    @property
    def distinguishable(self) -> bool:
        return self.verdict in ("better", "worse")

    def sentence(self, candidate: str = "the best trial", reference: str = "the baseline") -> str:
        """The comparison in plain words."""
        if self.ci is None:
            return f"No question was scored on {self.metric} for both {candidate} and {reference}: nothing to compare."
        low, high = self.ci
        interval = f"95 % CI [{low:+.3f}, {high:+.3f}], Wilcoxon p = {self.p:.3g}, {self.n} questions"
        left_out = f"; {self.unpaired} question(s) unscored by one of them were left out" if self.unpaired else ""
        diff = self.mean_difference
        if self.verdict == "better":
            return f"{candidate} beats {reference} on {self.metric} by {diff:+.3f} ({interval}): the gain is " \
                   f"distinguishable from zero{left_out}."
        if self.verdict == "worse":
            return f"{candidate} is worse than {reference} on {self.metric} by {diff:+.3f} ({interval}): the loss " \
                   f"is distinguishable from zero{left_out}."
        if self.verdict == "no difference":
            return f"{candidate} and {reference} score the same on {self.metric} on every paired question " \
                   f"({self.n} questions){left_out}."
        return f"{candidate} differs from {reference} on {self.metric} by {diff:+.3f} ({interval}): not " \
               f"distinguishable from zero — this difference could be luck{left_out}."


def compare(metric: str, reference: Mapping[str, float | None], candidate: Mapping[str, float | None],
            resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """Compare two {question id: score or None} maps on the questions both scored."""
    common = [q for q in reference if q in candidate]
    paired = [q for q in common if reference[q] is not None and candidate[q] is not None]
    # scored by one of the two only; a question neither scored (a retrieval metric without gold ids) is not missing
    scored = {q for q, v in reference.items() if v is not None} ^ {q for q, v in candidate.items() if v is not None}
    unpaired = len(scored)
    if not paired:
        return Comparison(metric, 0, unpaired, None, None, None, None, None, {})
    diffs = {q: float(candidate[q]) - float(reference[q]) for q in paired}
    values = list(diffs.values())
    return Comparison(
        metric, len(paired), unpaired,
        reference_mean=float(np.mean([reference[q] for q in paired])),
        candidate_mean=float(np.mean([candidate[q] for q in paired])),
        mean_difference=float(np.mean(values)),
        ci=paired_bootstrap_ci(values, resamples, seed), p=wilcoxon_p(values), differences=diffs,
    )


def per_question(result: EvalResult | None, metric: str) -> dict[str, float | None]:
    """{question id: score or None} of one evaluation, ready for `compare`."""
    return {q.id: q.value(metric) for q in result.questions} if result else {}


def compare_results(first: Sequence[str], reference: EvalResult, candidate: EvalResult) -> tuple[Comparison, ...]:
    """Two evaluations of the same questions compared on `first` (targets, guards), then on every other metric
    the candidate scored."""
    scored = [m for m, v in candidate.metrics.items() if v is not None]
    if candidate.retrieval.get("questions_scored"):
        scored += [m for m in RETRIEVAL_METRICS if m in candidate.retrieval]
    return tuple(compare(m, per_question(reference, m), per_question(candidate, m))
                 for m in dict.fromkeys([*first, *scored]))
