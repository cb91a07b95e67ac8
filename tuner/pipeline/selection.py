"""Dynamic K: let the reranker's confidence, or the shape of the scores (Weaviate's autocut), decide how many
chunks reach the generator."""

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


def autocut(scores: Sequence[float], jumps: int) -> int:
    """How many results Weaviate's autocut keeps (`auto_limit: jumps`), from scores ordered best first.

    Weaviate's algorithm: scores are normalised to 0 (first) … 1 (last) and compared with the straight line from
    the first to the last; every local maximum of (normalised score − line) is a jump, and the results are cut
    just before the `jumps`-th one. Scores all equal, or fewer than two, are kept whole."""
    n = len(scores)
    if n <= 1 or scores[-1] == scores[0]:
        return n
    diff = [(s - scores[0]) / (scores[-1] - scores[0]) - i / (n - 1) for i, s in enumerate(scores)]
    seen = 0
    for i in range(1, n):
        before = [diff[i - 1]] if i < n - 1 else diff[max(0, i - 2):i]  # the last point has no next: two before it
        after = [diff[i + 1]] if i < n - 1 else []
        if all(diff[i] > d for d in before + after):
            seen += 1
            if seen >= jumps:
                return i
    return n


def select_autocut(ranked: Sequence[Candidate], top_k: int, jumps: int) -> list[Candidate]:
    """The first `top_k` of `ranked` (best first), cut by autocut on their confidences: what a Weaviate hybrid
    query with `limit: top_k, auto_limit: jumps` returns when no reranker reorders it."""
    window = list(ranked[:top_k])
    return window[: autocut([c.confidence or 0.0 for c in window], jumps)]
