"""No reranking: retrieval order is kept, confidence is the fused score relative to the best candidate."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.pipeline.candidate import Candidate
from tuner.pipeline.rerankers._base import Reranker


class NoReranker(Reranker):
    name = "none"
    cacheable = False  # depends on alpha and fusion through the retrieval scores
    reorders = False

    def _score(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        scores = np.array([c.score for c in candidates], dtype=np.float64)
        top = scores.max()
        return scores / top if top > 0 else np.zeros_like(scores)
