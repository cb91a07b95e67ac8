"""Embedder contract: texts in, L2-normalised float32 rows out (so a dot product is the cosine)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

# called with the number of texts just embedded, for progress bars
ProgressCallback = Callable[[int], None]


class Embedder(ABC):
    #: identifies the model in caches: two embedders with the same name must give the same vectors
    name: str
    dim: int
    #: tokens of a text the model reads (the rest is cut off); None: not known
    window: int | None = None

    @abstractmethod
    def encode(self, texts: Sequence[str], on_progress: ProgressCallback | None = None) -> np.ndarray:
        """Return an array of shape (len(texts), dim), dtype float32, rows of unit length."""


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
