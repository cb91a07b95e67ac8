"""Bi-encoder reranker: cosine between question and chunk embeddings, squashed to a confidence.

The sigmoid's midpoint and temperature are explicit parameters: a cosine of `midpoint` means 50 % confidence.
The defaults were read off all-MiniLM-L6-v2 on squad2_dev_normans (relevant pairs ~0.5-0.7, others ~0.1-0.3).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.models.embedders import Embedder
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.rerankers._base import Reranker, sigmoid


class EmbeddingReranker(Reranker):
    name = "embedding"

    def __init__(self, embedder: Embedder, midpoint: float = 0.35, temperature: float = 0.1):
        super().__init__()
        self.embedder = embedder
        self.midpoint = midpoint
        self.temperature = temperature

    def _score(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        vectors = self.embedder.encode([question] + [c.chunk.text for c in candidates])
        cosines = vectors[1:] @ vectors[0]
        return sigmoid((cosines - self.midpoint) / self.temperature)
