"""How well a judge's scores agree with labels: ROC AUC and its bootstrap interval, balanced accuracy at a cut, the
best cut and its cross-validated accuracy. Pure statistics over (score, supported) pairs."""

from __future__ import annotations

import logging
import random
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tuner.evaluation.judge.cut import MIDDLE

if TYPE_CHECKING:  # the scorer imports RAGAS: reports read saved checks without it
    pass

log = logging.getLogger(__name__)


#: folds of the cross-validated cut; resamples of the AUC's bootstrap interval
CUT_FOLDS = 5



BOOTSTRAP_RESAMPLES = 500



def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """ROC AUC: the chance a supported case outscores an unsupported one (ties count half)."""
    if not positives or not negatives:
        return None
    ordered = sorted(negatives)
    wins = sum(bisect_left(ordered, p) + 0.5 * (bisect_right(ordered, p) - bisect_left(ordered, p))
               for p in positives)
    return wins / (len(positives) * len(negatives))



def auc_interval(positives: Sequence[float], negatives: Sequence[float], level: float = 0.95,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """The AUC's percentile bootstrap interval, each class resampled on its own (seeded: a check says the same
    twice). Ten unsupported cases leave an AUC uncertain by ±0.1: the interval says so."""
    if len(positives) < 2 or len(negatives) < 2:
        return None
    rng = random.Random(0)
    draws = sorted(auc(rng.choices(positives, k=len(positives)), rng.choices(negatives, k=len(negatives)))
                   for _ in range(resamples))
    tail = (1 - level) / 2
    return draws[int(tail * resamples)], draws[min(resamples - 1, int((1 - tail) * resamples))]



Verdict = tuple[float | None, bool]  # (score, supported?): an unscored case has no score



def balanced_accuracy(verdicts: Sequence[Verdict], cut: float) -> float | None:
    """The mean of the two classes' accuracies when a score at or above `cut` reads supported (an unscored case
    is wrong): what a cut is worth when one class is rare, as hallucinations are."""
    classes = [[v for v, supported in verdicts if supported == side] for side in (True, False)]
    if not all(classes):
        return None
    right = (sum(v is not None and v >= cut for v in classes[0]) / len(classes[0]),
             sum(v is not None and v < cut for v in classes[1]) / len(classes[1]))
    return sum(right) / 2



def best_cut(verdicts: Sequence[Verdict]) -> float | None:
    """The cut with the best balanced accuracy on `verdicts`, midway between neighbouring scores (of equals, the
    one nearest the middle)."""
    values = sorted({v for v, _ in verdicts if v is not None})
    if balanced_accuracy(verdicts, MIDDLE) is None or not values:
        return None
    candidates = [(a + b) / 2 for a, b in zip(values, values[1:])] or values
    return max(candidates, key=lambda cut: (balanced_accuracy(verdicts, cut), -abs(cut - MIDDLE)))



def cross_validated(verdicts: Sequence[Verdict], folds: int = CUT_FOLDS) -> float | None:
    """Balanced accuracy of a cut chosen without the labels it is scored on: each fold is classified by the best
    cut of the other folds (stratified, seeded). None with fewer cases of a class than folds."""
    classes = [[x for x in verdicts if x[1] == side] for side in (True, False)]
    if min(len(c) for c in classes) < folds:
        return None
    rng, assigned = random.Random(0), [[] for _ in range(folds)]
    for members in classes:
        members = list(members)
        rng.shuffle(members)
        for i, member in enumerate(members):
            assigned[i % folds].append(member)
    predicted = []
    for i, held in enumerate(assigned):
        cut = best_cut([x for j, fold in enumerate(assigned) if j != i for x in fold])
        predicted += [((1.0 if v is not None and v >= cut else 0.0) if v is not None else None, s) for v, s in held]
    return balanced_accuracy(predicted, 0.5)
