"""Hybrid fusion: Weaviate's two methods, so an alpha tuned here transfers to a Weaviate deployment, and two
score normalisations other RAG toolkits offer.

alpha = 1 is pure vector, alpha = 0 pure BM25: BM25 weight 1 - alpha, vector weight alpha; a side with weight 0
is not searched at all. Each list's scores are normalised, weighted and added:

* relative_score (Weaviate's default, relativeScoreFusion): min-max to [0, 1] (a list whose scores are all equal
  rescales to 1); a hit missing from one list counts 0 there.
* ranked (rankedFusion): weight / (rank + k), rank counted from 0, k = 60 in Weaviate (`rank_constant`); a
  missing hit adds nothing.
* zscore: (score - mean) / deviation; a missing hit counts as the list's lowest (not as its mean, which would
  lift a document one retriever ranked below its whole window above the ones it did rank).
* dbsf (distribution-based, as Qdrant's): mean ± 3 deviations mapped to [0, 1], clipped; a missing hit counts 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tuner.pipeline.backends import Hits

RANK_CONSTANT = 60


def rescale(scores: np.ndarray) -> np.ndarray:
    """Min-max to [0, 1]; equal scores (including a single hit) become 1."""
    if len(scores) == 0:
        return scores
    low, high = float(scores.min()), float(scores.max())
    if high == low:
        return np.ones_like(scores, dtype=np.float64)
    return (scores - low) / (high - low)


def standardise(scores: np.ndarray) -> np.ndarray:
    """z-scores; equal scores (including a single hit) become 0."""
    deviation = float(scores.std())
    if deviation == 0:
        return np.zeros_like(scores, dtype=np.float64)
    return (scores - float(scores.mean())) / deviation


def distribution_scaled(scores: np.ndarray) -> np.ndarray:
    """mean - 3 deviations -> 0, mean + 3 deviations -> 1, clipped; equal scores become 0.5."""
    deviation = float(scores.std())
    if deviation == 0:
        return np.full_like(scores, 0.5, dtype=np.float64)
    low = float(scores.mean()) - 3 * deviation
    return np.clip((scores - low) / (6 * deviation), 0.0, 1.0)


#: fusion -> (normalise a list's scores, what a hit missing from that list counts, given the normalised list)
NORMALISERS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], float]]] = {
    "relative_score": (rescale, lambda _: 0.0),
    "zscore": (standardise, lambda normalised: float(normalised.min())),
    "dbsf": (distribution_scaled, lambda _: 0.0),
}
FUSIONS = ("relative_score", "ranked", *[name for name in NORMALISERS if name != "relative_score"])


def fuse(weighted: Sequence[tuple[Hits, float]], fusion: str, limit: int, rank_constant: int = RANK_CONSTANT) -> Hits:
    """Fuse (hits, weight) lists; ties keep the order in which hits were first seen."""
    if fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r} ({', '.join(FUSIONS)})")
    lists = [(hits, weight) for hits, weight in weighted if weight != 0 and len(hits)]
    totals: dict[int, float] = {}
    floors = 0.0  # what every list adds for a hit it does not hold; subtracted back below for the ones it does
    for hits, weight in lists:
        if fusion == "ranked":
            contributions, floor = weight / (np.arange(len(hits)) + rank_constant), 0.0
        else:
            normalise, missing = NORMALISERS[fusion]
            normalised = normalise(hits.scores)
            contributions, floor = weight * normalised, weight * missing(normalised)
        floors += floor
        for chunk, value in zip(hits.ids.tolist(), (contributions - floor).tolist()):
            totals[chunk] = totals.get(chunk, 0.0) + value
    if not totals:
        return Hits.empty()
    ids = np.fromiter(totals.keys(), dtype=np.int64, count=len(totals))
    scores = np.fromiter(totals.values(), dtype=np.float64, count=len(totals)) + floors
    order = np.argsort(-scores, kind="stable")[:limit]
    return Hits(ids[order], scores[order])


def hybrid(bm25: Hits, dense: Hits, alpha: float, fusion: str, limit: int,
           rank_constant: int = RANK_CONSTANT) -> Hits:
    return fuse([(bm25, 1.0 - alpha), (dense, alpha)], fusion, limit, rank_constant)
