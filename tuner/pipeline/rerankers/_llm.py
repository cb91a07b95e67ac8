"""LLM pointwise reranker: P(yes) to "does this passage help answer the question?", read from the model.

An LLM pair costs ~0.7 s on the 0.5B model here, so only the first `top_n` candidates are scored; the rest get
confidence 0 and keep their retrieval order behind them. Calls go through the cached LLM, so every
(question, chunk) pair is paid for once per model, across trials and runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.models.llms import LLM
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.rerankers._base import Reranker

# Passage first, then a yes/no question: on Qwen2.5-1.5B this separates answering passages (P(yes) 0.98) from
# unrelated ones (0.2-0.3); a question-first wording squeezed everything into 0.6-0.9.
PROMPT = """Passage: {passage}

Question: {question}

Does the passage answer the question? Answer yes or no."""


class LLMReranker(Reranker):
    name = "llm"

    def __init__(self, llm: LLM, top_n: int = 5):
        super().__init__()
        self.llm = llm
        self.top_n = top_n

    def confidences(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        scored = super().confidences(question, candidates[: self.top_n])
        return np.concatenate([scored, np.zeros(max(0, len(candidates) - self.top_n))])

    def _score(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        return np.nan_to_num(np.array([  # nan: the reply said neither yes nor no, no confidence
            float(self.llm.yes_probability(
                [{"role": "user", "content": PROMPT.format(question=question, passage=c.chunk.text)}]).text)
            for c in candidates
        ]), nan=0.0)
