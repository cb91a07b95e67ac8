"""Dynamic K: let the reranker's confidence decide how many chunks reach the generator."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.pipeline.candidate import Candidate


def select_dynamic_k(ranked: Sequence[Candidate], threshold: float, min_docs: int, max_docs: int) -> list[Candidate]:
    """`ranked` is ordered by confidence, best first. Keep the best always, add every chunk at or above the
    threshold, cap at max_docs, and floor at min_docs (topping up in rank order when too few pass)."""
    if not ranked:
        return []
    passing = 1 + sum(1 for c in ranked[1:] if (c.confidence or 0.0) >= threshold)
    return list(ranked[: max(min_docs, min(passing, max_docs))])
