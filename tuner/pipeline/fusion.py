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

Ties are broken as Weaviate breaks them: fused scores closer than 1e-7 (Weaviate sums in float32 and calls those
equal) are ordered by the hit's own score in the last list holding it (the vector list's when both do; again
within 1e-7), then by id (Weaviate's UUID order, which the Weaviate backend makes chunk order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tuner.pipeline.backends._base import Hits

RANK_CONSTANT = 60
#: Weaviate orders scores closer than this as equal
TIE = 1e-7


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
    """Fuse (hits, weight) lists, best first; ties as Weaviate orders them (see above)."""
    if fusion not in FUSIONS:
        raise ValueError(f"unknown fusion {fusion!r} ({', '.join(FUSIONS)})")
    lists = [(hits, weight) for hits, weight in weighted if weight != 0 and len(hits)]
    totals: dict[int, float] = {}
    own: dict[int, float] = {}  # a hit's score in the last list holding it: the first tie-break
    floors = 0.0  # what every list adds for a hit it does not hold; subtracted back below for the ones it does
    for hits, weight in lists:
        if fusion == "ranked":
            contributions, floor = weight / (np.arange(len(hits)) + rank_constant), 0.0
        else:
            normalise, missing = NORMALISERS[fusion]
            normalised = normalise(hits.scores)
            contributions, floor = weight * normalised, weight * missing(normalised)
        floors += floor
        for chunk, value, score in zip(hits.ids.tolist(), (contributions - floor).tolist(), hits.scores.tolist()):
            totals[chunk] = totals.get(chunk, 0.0) + value
            own[chunk] = score
    if not totals:
        return Hits.empty()
    ids = np.fromiter(totals.keys(), dtype=np.int64, count=len(totals))
    scores = np.fromiter(totals.values(), dtype=np.float64, count=len(totals)) + floors
    own_scores = np.fromiter(own.values(), dtype=np.float64, count=len(own))
    order = weaviate_order(ids, scores, own_scores)[:limit]
    return Hits(ids[order], scores[order])


def weaviate_order(ids: np.ndarray, scores: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Positions best first: by score, where a run of scores each closer than TIE to the one before ties; within
    a tie by own score (runs again), then by id ascending. Weaviate's comparator says the same pairwise; runs
    make it an order even where three scores chain across more than TIE."""
    scores, own = _as_float32(scores), _as_float32(own)
    order = np.lexsort((ids, -own, -scores))
    run = np.concatenate([[0], np.cumsum(-np.diff(scores[order]) >= TIE)])
    tied = np.empty_like(run)
    tied[order] = run
    order = np.lexsort((ids, -own, tied))
    own_run = np.concatenate([[0], np.cumsum((np.diff(tied[order]) != 0) | (-np.diff(own[order]) >= TIE))])
    by_own = np.empty_like(own_run)
    by_own[order] = own_run
    return np.lexsort((ids, by_own))


def _as_float32(values: np.ndarray) -> np.ndarray:
    """The values Weaviate compares (float32), as float64 so that differences are exact."""
    return values.astype(np.float32).astype(np.float64)


def hybrid(bm25: Hits, dense: Hits, alpha: float, fusion: str, limit: int,
           rank_constant: int = RANK_CONSTANT) -> Hits:
    return fuse([(bm25, 1.0 - alpha), (dense, alpha)], fusion, limit, rank_constant)
