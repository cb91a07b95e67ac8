"""Reranker contract: a calibrated 0-1 confidence that a chunk helps answer the question.

Implementations score texts in `_score`; the base class keeps a per-(question, chunk) memo so a study that
meets the same pair in many trials pays for it once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from tuner.pipeline.candidate import Candidate


class Reranker(ABC):
    name: str
    #: False when the confidence depends on more than (question, chunk text), e.g. on retrieval scores
    cacheable: bool = True
    #: False when the confidences keep the retrieval scores' order (so the pool still merges with the window)
    reorders: bool = True

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], float] = {}

    def confidences(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        """One confidence in [0, 1] per candidate, in the candidates' order."""
        if not candidates:
            return np.zeros(0)
        if not self.cacheable:
            return np.clip(self._score(question, candidates), 0.0, 1.0)
        keys = [(question, c.chunk.text) for c in candidates]
        missing = [i for i, key in enumerate(keys) if key not in self._memo]
        if missing:
            scores = self._score(question, [candidates[i] for i in missing])
            for i, score in zip(missing, np.clip(scores, 0.0, 1.0).tolist()):
                self._memo[keys[i]] = score
        return np.array([self._memo[key] for key in keys])

    @abstractmethod
    def _score(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        """Confidences in [0, 1] for these candidates."""


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))
