"""Does Weaviate order a hybrid query as tuner's fusion does? (`tuner index --check-hybrid`)

For each question, alpha and fusion, Weaviate's own hybrid query beside tuner's fusion of the same two candidate
lists Weaviate returns; orders may differ only among near ties. Above both the backend and the fusion, so neither
imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tuner.errors import DataError
from tuner.pipeline.backends._base import Hits
from tuner.pipeline.backends._weaviate import WeaviateBackend
from tuner.pipeline.fusion import hybrid

#: Weaviate sums in float32 and calls scores within 1e-7 tied: orders may differ where scores are this close
NEAR_TIE = 1e-6


@dataclass(frozen=True)
class FusionCheck:
    """Weaviate's hybrid order against tuner's fusion of the same two candidate lists, for one question."""

    question: str
    alpha: float
    fusion: str
    weaviate: Hits
    tuner: Hits

    @property
    def same_order(self) -> bool:
        return self.weaviate.ids.tolist() == self.tuner.ids.tolist()

    @property
    def near_tie(self) -> bool:
        """The orders differ only among hits Weaviate scored within NEAR_TIE of each other."""
        theirs, ours = self.weaviate.ids.tolist(), self.tuner.ids.tolist()
        differing = [self.weaviate.scores[i] for i in range(min(len(theirs), len(ours))) if theirs[i] != ours[i]]
        return (not self.same_order and len(theirs) == len(ours) and sorted(theirs) == sorted(ours)
                and max(differing) - min(differing) <= NEAR_TIE)

    @property
    def score_gap(self) -> float:
        """The largest difference between the two scores of a hit both return."""
        ours = dict(zip(self.tuner.ids.tolist(), self.tuner.scores.tolist()))
        return max((abs(score - ours[i]) for i, score in zip(self.weaviate.ids.tolist(),
                                                             self.weaviate.scores.tolist()) if i in ours), default=0.0)


def check_fusion(backend: WeaviateBackend, vectors: Sequence[np.ndarray], questions: Sequence[str],
                 alphas: Sequence[float], fusions: Sequence[str], limit: int, window: int = 100,
                 on_question: Callable[[], None] | None = None) -> list[FusionCheck]:
    """For each question (with its query vector), alpha and fusion: Weaviate's own hybrid query beside tuner's
    fusion of Weaviate's BM25 and vector lists (each `window` long, as Weaviate's hybrid fetches them)."""
    checks = []
    for question, vector in zip(questions, vectors):
        bm25, dense = backend.bm25(question, max(window, limit)), backend.dense(vector, max(window, limit))
        for fusion in fusions:
            for alpha in alphas:
                theirs = backend.hybrid(question, vector, alpha, fusion, limit)
                checks.append(FusionCheck(question, alpha, fusion, theirs, hybrid(bm25, dense, alpha, fusion, limit)))
        if on_question is not None:
            on_question()
    return checks


def require_agreement(checks: Sequence[FusionCheck]) -> None:
    """The pass/fail rule: every order equal, or different only among near ties; else one line naming the first."""
    different = [c for c in checks if not c.same_order and not c.near_tie]
    if different:
        first = different[0]
        raise DataError(f"{len(different)} of {len(checks)} hybrid queries ordered differently, e.g. {first.fusion} "
                        f"alpha {first.alpha:g} on {first.question!r}: Weaviate {first.weaviate.ids.tolist()} vs tuner "
                        f"{first.tuner.ids.tolist()}")
