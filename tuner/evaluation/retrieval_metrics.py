"""Id-based retrieval metrics at document level: a chunk counts for its document, each document once.

Ranking metrics (recall@n, nDCG@10, MRR) rank unique documents — a document takes the position of its best chunk
and its other chunks take none — so the figures compare with BEIR, trec_eval and peers that rank documents.
Precision reads the unique documents of the selected set that reaches the generator; K counts selected chunks.
Questions without gold ids get no retrieval metrics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

RANKING_CUTOFFS = (1, 5, 10)


def question_metrics(ranking: Sequence[str], selected: Sequence[str], gold: Iterable[str], k: int) -> dict[str, float]:
    """`ranking` and `selected` are the doc ids of the ranked and selected chunks, in order."""
    gold = set(gold)
    ranking, selected = unique(ranking), unique(selected)
    metrics = {"recall@k": recall_at(ranking, gold, k)}
    metrics.update({f"recall@{n}": recall_at(ranking, gold, n) for n in RANKING_CUTOFFS})
    metrics["precision"] = sum(doc in gold for doc in selected) / len(selected) if selected else 0.0
    metrics["ndcg@10"] = ndcg_at(ranking, gold, 10)
    rank = first_rank(ranking, gold)
    metrics["mrr"] = 1.0 / rank if rank else 0.0
    return metrics


def unique(docs: Sequence[str]) -> list[str]:
    """Each document once, at its first (best) chunk's position."""
    return list(dict.fromkeys(docs))


def first_rank(ranking: Sequence[str], gold: set[str] | frozenset[str]) -> int | None:
    """Document-level rank (1 = first) of the first gold document; None if absent."""
    return next((rank for rank, doc in enumerate(unique(ranking), 1) if doc in gold), None)


def recall_at(ranking: Sequence[str], gold: set[str], n: int) -> float:
    """Share of the gold documents among the first n of a unique-document ranking."""
    return len(gold.intersection(ranking[:n])) / len(gold)


def ndcg_at(ranking: Sequence[str], gold: set[str], n: int) -> float:
    """Binary-relevance nDCG@n of a unique-document ranking."""
    dcg = sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(ranking[:n]) if doc in gold)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(len(gold), n)))
    return dcg / ideal


def aggregate(per_question: Sequence[dict[str, float]], selected_counts: Sequence[int]) -> dict[str, float | int]:
    """Means over the questions that have gold ids; mean_k over every question."""
    scored = [m for m in per_question if m]
    summary: dict[str, float | int] = {}
    if scored:
        for key in scored[0]:
            summary[key] = float(np.mean([m[key] for m in scored]))
    summary["mean_k"] = float(np.mean(selected_counts)) if selected_counts else 0.0
    summary["questions_scored"] = len(scored)
    return summary
