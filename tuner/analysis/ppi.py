"""Prediction-powered inference (Angelopoulos et al., 2023): a judge's mean corrected by a few human labels.

The judge scores every question; on the labelled ones, its error against the human label (the rectifier) estimates
its bias. The corrected mean is the judge's mean over all questions minus the mean rectifier, and its variance the
sum of both parts' — narrower than the labels alone whenever the judge tracks the labels. The paired case (two
configurations, the same questions) corrects the per-question difference the same way.

The interval uses Student's t with one degree of freedom fewer than the labels (the normal quantile of the paper
undercovers with the few dozen labels a person gives). The estimate is unbiased when the labelled questions are a
uniform random sample of the judged ones (stratified with proportional shares is such a sample)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy.stats import t as student


@dataclass(frozen=True)
class Corrected:
    estimate: float
    ci: tuple[float, float]
    labelled: int  # questions with a human label
    judged: int  # questions in all (labelled or not)

    @property
    def width(self) -> float:
        return self.ci[1] - self.ci[0]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _variance(values: Sequence[float]) -> float:
    """Unbiased sample variance (0 for a single value)."""
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def ppi_mean(judged: Sequence[float], labelled_judged: Sequence[float], labels: Sequence[float],
             confidence: float = 0.95) -> Corrected:
    """The corrected mean of what `labels` measure. `judged`: the judge's scores of the unlabelled questions;
    `labelled_judged[i]`: the judge's score on the question whose human label is `labels[i]`."""
    if len(labelled_judged) != len(labels) or not labels or not judged:
        raise ValueError("ppi_mean needs judge scores and at least one labelled pair")
    rectifier = [f - y for f, y in zip(labelled_judged, labels)]
    estimate = _mean(judged) - _mean(rectifier)
    spread = math.sqrt(_variance(judged) / len(judged) + _variance(rectifier) / len(rectifier))
    return _interval(estimate, spread, len(labels), len(labels) + len(judged), confidence)


def _interval(estimate: float, spread: float, labelled: int, judged: int, confidence: float) -> Corrected:
    quantile = student.ppf(0.5 + confidence / 2, max(labelled - 1, 1))
    return Corrected(estimate, (estimate - quantile * spread, estimate + quantile * spread), labelled, judged)


def ppi_difference(judged_a: Sequence[float], judged_b: Sequence[float], labelled_a: Sequence[float],
                   labelled_b: Sequence[float], labels_a: Sequence[float], labels_b: Sequence[float],
                   confidence: float = 0.95) -> Corrected:
    """A − B, paired by question: the judge's per-question differences corrected by the labelled ones (each
    labelled question carries a human label for both configurations' answers)."""
    return ppi_mean([a - b for a, b in zip(judged_a, judged_b)],
                    [a - b for a, b in zip(labelled_a, labelled_b)],
                    [a - b for a, b in zip(labels_a, labels_b)], confidence)


def labels_only(labels: Sequence[float], confidence: float = 0.95) -> Corrected:
    """The classical interval from the labels alone, to compare widths with."""
    return _interval(_mean(labels), math.sqrt(_variance(labels) / len(labels)), len(labels), len(labels),
                     confidence)


#: labelled questions below which no corrected figure is given (the rectifier's spread cannot be told)
MIN_LABELLED = 5


def correct(judge: Mapping[str, float | None], human: Mapping[str, float],
            confidence: float = 0.95) -> Corrected | None:
    """The corrected mean over `judge`'s questions ({id: judge score or None}) from `human` ({id: label}): the
    unlabelled questions' judge scores, rectified on the labelled ones; the labels alone when every question is
    labelled. None below MIN_LABELLED labelled questions the judge scored."""
    labelled = [q for q in judge if q in human and judge[q] is not None]
    if len(labelled) < MIN_LABELLED:
        return None
    rest = [v for q, v in judge.items() if v is not None and q not in human]
    if not rest:
        return labels_only([human[q] for q in labelled], confidence)
    return ppi_mean(rest, [judge[q] for q in labelled], [human[q] for q in labelled], confidence)


def correct_difference(reference: Mapping[str, float | None], candidate: Mapping[str, float | None],
                       human_reference: Mapping[str, float], human_candidate: Mapping[str, float],
                       confidence: float = 0.95) -> Corrected | None:
    """candidate − reference, paired by question, corrected on the questions whose two answers both carry a label."""
    both = {q for q in reference if q in candidate and reference[q] is not None and candidate[q] is not None}
    judged = {q: candidate[q] - reference[q] for q in both}
    human = {q: human_candidate[q] - human_reference[q] for q in both if q in human_reference and q in human_candidate}
    return correct(judged, human, confidence)
