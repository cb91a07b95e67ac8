"""A chunk on its way through the pipeline, with the score that put it there."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.pipeline.chunking import Chunk


@dataclass(frozen=True)
class Candidate:
    position: int  # index of the chunk in the project's chunk list
    chunk: Chunk
    score: float  # fused retrieval score (decayed per hop for graph-expanded chunks)
    hop: int = 0  # 0 = retrieved, n = reached through n shared-entity hops
    confidence: float | None = None  # the reranker's 0-1 confidence, once reranked
