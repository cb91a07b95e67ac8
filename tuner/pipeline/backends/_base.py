"""Retrieval backend contract: a store that answers BM25 and dense queries over the project's chunks.

Fusion is deliberately not the backend's job: both candidate lists are fetched once per question and fused
in tuner (tuner.pipeline.fusion, Weaviate's semantics), so a study can try every alpha without a new query.
Hits refer to chunks by their position in the list given to `add`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class Hits(NamedTuple):
    ids: np.ndarray  # int64 chunk positions, best first
    scores: np.ndarray  # float64, descending

    @classmethod
    def empty(cls) -> Hits:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))

    def __len__(self) -> int:  # type: ignore[override]
        return len(self.ids)


class RetrievalBackend(ABC):
    @abstractmethod
    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store the chunks (texts and unit-length vectors, aligned by position)."""

    @abstractmethod
    def bm25(self, query: str, limit: int) -> Hits:
        """Keyword hits with a positive BM25 score, best first."""

    @abstractmethod
    def dense(self, vector: np.ndarray, limit: int) -> Hits:
        """Nearest chunks by cosine; score = 1 - cosine distance (Weaviate's certainty-free score)."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored chunks."""
