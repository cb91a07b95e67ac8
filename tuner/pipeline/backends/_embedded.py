"""In-process backend: exact dense search in numpy, BM25 with bm25s. Measured best on small machines."""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np
import Stemmer

from tuner.pipeline.backends._base import Hits, RetrievalBackend


class EmbeddedBackend(RetrievalBackend):
    # Weaviate's BM25 defaults, so scores rank the same way on both backends
    def __init__(self, k1: float = 1.2, b: float = 0.75, stopwords: str = "en", stemmer: str = "none"):
        self.k1 = k1
        self.b = b
        self.stopwords = stopwords if stopwords != "none" else None
        self.stemmer = None if stemmer == "none" else Stemmer.Stemmer(stemmer)
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._bm25: bm25s.BM25 | None = None

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b)
        self._bm25.index(self._tokenize(list(texts)), show_progress=False)

    def bm25(self, query: str, limit: int) -> Hits:
        if self._bm25 is None or not len(self):
            return Hits.empty()
        tokens = self._tokenize([query])[0]
        if not tokens:
            return Hits.empty()
        scores = self._bm25.get_scores(tokens).astype(np.float64)
        return _top(scores, limit, keep=scores > 0)

    def dense(self, vector: np.ndarray, limit: int) -> Hits:
        if not len(self):
            return Hits.empty()
        scores = (self._vectors @ np.asarray(vector, dtype=np.float32)).astype(np.float64)
        return _top(scores, limit)

    def __len__(self) -> int:
        return len(self._vectors)

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        return bm25s.tokenize(texts, stopwords=self.stopwords, stemmer=self.stemmer, return_ids=False,
                              show_progress=False)


def _top(scores: np.ndarray, limit: int, keep: np.ndarray | None = None) -> Hits:
    candidates = np.flatnonzero(keep) if keep is not None else np.arange(len(scores))
    if len(candidates) > limit:
        part = np.argpartition(-scores[candidates], limit - 1)[:limit]
        candidates = candidates[part]
    # stable order: score descending, then chunk position, so results never depend on the partition
    order = np.lexsort((candidates, -scores[candidates]))
    ids = candidates[order].astype(np.int64)
    return Hits(ids, scores[ids])
