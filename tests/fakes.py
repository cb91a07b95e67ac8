"""Fakes for unit tests of plumbing; every capability also has a real-model test."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from tuner.models.embedders import Embedder, normalise


class HashingEmbedder(Embedder):
    """Bag of hashed words: deterministic, instant, and similar texts get similar vectors."""

    name = "hashing-test"

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.calls = 0
        self.texts_encoded = 0

    def encode(self, texts: Sequence[str], on_progress=None) -> np.ndarray:
        self.calls += 1
        self.texts_encoded += len(texts)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[i, zlib.crc32(word.encode()) % self.dim] += 1.0
            rows[i, -1] += 1e-3  # no all-zero rows
        if on_progress:
            on_progress(len(texts))
        return normalise(rows)
