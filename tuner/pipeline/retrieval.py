"""Hybrid retrieval: candidates fetched once per question, re-fused from memory for every alpha and fusion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuner.models.embedders import Embedder
from tuner.pipeline.backends import Hits, RetrievalBackend
from tuner.pipeline.fusion import RANK_CONSTANT, hybrid


@dataclass(frozen=True)
class Candidates:
    bm25: Hits
    dense: Hits
    window: int


class HybridRetriever:
    def __init__(self, backend: RetrievalBackend, embedder: Embedder, window: int = 100):
        self.backend = backend
        self.embedder = embedder
        self.window = window  # Weaviate fetches max(100, limit) per side
        self._cache: dict[str, Candidates] = {}

    def candidates(self, question: str, limit: int = 0, dense_text: str | None = None) -> Candidates:
        """BM25 hits for `question`, dense hits for `dense_text` (default: the question; HyDE: its passage)."""
        window = max(self.window, limit)
        dense_text = question if dense_text is None else dense_text
        key = question if dense_text == question else (question, dense_text)
        cached = self._cache.get(key)
        if cached is None or cached.window < window:
            cached = self._cache[key] = self._fetch(question, self.embedder.encode([dense_text])[0], window)
        return cached

    def prefetch(self, questions: Sequence[str], limit: int = 0) -> None:
        """Fetch the candidates of every question not yet fetched, their vectors embedded in batches: one question
        at a time, the embedder ran a batch of one per question (0.2 s each on 2 cores, most of a first trial)."""
        window = max(self.window, limit)
        todo = list(dict.fromkeys(q for q in questions if q not in self._cache or self._cache[q].window < window))
        for question, vector in zip(todo, self.embedder.encode(todo) if todo else []):
            self._cache[question] = self._fetch(question, vector, window)

    def _fetch(self, question: str, vector: np.ndarray, window: int) -> Candidates:
        return Candidates(self.backend.bm25(question, window), self.backend.dense(vector, window), window)

    def search(self, question: str, alpha: float, fusion: str, limit: int, rank_constant: int = RANK_CONSTANT,
               dense_text: str | None = None) -> Hits:
        found = self.candidates(question, limit, dense_text)
        return hybrid(found.bm25, found.dense, alpha, fusion, limit, rank_constant)
