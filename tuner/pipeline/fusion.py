"""Hybrid fusion with Weaviate's semantics, so an alpha tuned here transfers to a Weaviate deployment.

alpha = 1 is pure vector, alpha = 0 pure BM25: BM25 weight 1 - alpha, vector weight alpha; a side with
weight 0 is not searched at all. relative_score (Weaviate's default, relativeScoreFusion) min-max rescales
each list to [0, 1] (a list whose scores are all equal rescales to 1) and adds weighted scores, a missing hit
counting 0. ranked (rankedFusion) adds weight / (rank + 60), rank counted from 0.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def fuse(weighted: Sequence[tuple[Hits, float]], fusion: str, limit: int) -> Hits:
    """Fuse (hits, weight) lists; ties keep the order in which hits were first seen."""
    totals: dict[int, float] = {}
    for hits, weight in weighted:
        if weight == 0 or len(hits) == 0:
            continue
        if fusion == "relative_score":
            contributions = weight * rescale(hits.scores)
        elif fusion == "ranked":
            contributions = weight / (np.arange(len(hits)) + RANK_CONSTANT)
        else:
            raise ValueError(f"unknown fusion {fusion!r} (relative_score or ranked)")
        for chunk, value in zip(hits.ids.tolist(), contributions.tolist()):
            totals[chunk] = totals.get(chunk, 0.0) + value
    if not totals:
        return Hits.empty()
    ids = np.fromiter(totals.keys(), dtype=np.int64, count=len(totals))
    scores = np.fromiter(totals.values(), dtype=np.float64, count=len(totals))
    order = np.argsort(-scores, kind="stable")[:limit]
    return Hits(ids[order], scores[order])


def hybrid(bm25: Hits, dense: Hits, alpha: float, fusion: str, limit: int) -> Hits:
    return fuse([(bm25, 1.0 - alpha), (dense, alpha)], fusion, limit)
