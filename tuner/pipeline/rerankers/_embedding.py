"""Bi-encoder reranker: cosine between question and chunk embeddings, squashed to a confidence.

The sigmoid's midpoint and temperature are explicit parameters: a cosine of `midpoint` means 50 % confidence.
The project defaults (0.42, 0.08) were read off all-MiniLM-L6-v2 top-10 lists: median cosine of relevant chunks
0.50 (SQuAD Normans), 0.66 (demo), 0.68 (CLAPNQ); of irrelevant ones 0.27-0.33.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.models.embedders import Embedder
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.rerankers._base import Reranker, sigmoid


class EmbeddingReranker(Reranker):
    name = "embedding"

    def __init__(self, embedder: Embedder, midpoint: float = 0.42, temperature: float = 0.08):
        super().__init__()
        self.embedder = embedder
        self.midpoint = midpoint
        self.temperature = temperature

    def _score(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        vectors = self.embedder.encode([question] + [c.chunk.text for c in candidates])
        cosines = vectors[1:] @ vectors[0]
        return sigmoid((cosines - self.midpoint) / self.temperature)
