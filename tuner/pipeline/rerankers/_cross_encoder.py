"""sentence-transformers CrossEncoder reranker (any local or cached model); logits become confidences by sigmoid."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.errors import TunerError
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.rerankers._base import Reranker, sigmoid


class CrossEncoderReranker(Reranker):
    name = "cross-encoder"

    def __init__(self, model: str, batch_size: int = 16, max_length: int = 512, device: str = "cpu"):
        super().__init__()
        self.model = model
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        try:
            import torch
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise TunerError("the cross-encoder reranker needs sentence-transformers: "
                             "pip install 'rag-tuner[embed]'") from None
        try:
            # raw logits out: the sigmoid is applied here, whatever the model's default activation
            self._model = CrossEncoder(model, device=device, max_length=max_length, activation_fn=torch.nn.Identity())
        except Exception as exc:
            raise TunerError(f"cross-encoder '{model}' could not be loaded offline ({type(exc).__name__}): "
                             "set rerankers.cross_encoder_model to a local model folder") from None
        if self._model.num_labels != 1:
            raise TunerError(f"cross-encoder '{model}' has {self._model.num_labels} labels; a relevance model has 1")

    def _score(self, question: str, candidates: Sequence[Candidate]) -> np.ndarray:
        pairs = [(question, c.chunk.text) for c in candidates]
        logits = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        return sigmoid(np.asarray(logits).reshape(-1))
