"""Rerankers behind one contract (`Reranker`): none, embedding (bi-encoder), cross-encoder."""

from __future__ import annotations

from tuner.config import RerankerConfig
from tuner.errors import ConfigError
from tuner.models.embedders import Embedder
from tuner.pipeline.rerankers._base import Reranker
from tuner.pipeline.rerankers._cross_encoder import CrossEncoderReranker
from tuner.pipeline.rerankers._embedding import EmbeddingReranker
from tuner.pipeline.rerankers._none import NoReranker

__all__ = ["Reranker", "NoReranker", "EmbeddingReranker", "CrossEncoderReranker", "make_reranker"]


def make_reranker(name: str, settings: RerankerConfig, embedder: Embedder) -> Reranker:
    if name == "none":
        return NoReranker()
    if name == "embedding":
        return EmbeddingReranker(embedder, settings.embedding_midpoint, settings.embedding_temperature)
    if name == "cross-encoder":
        if not settings.cross_encoder_model:
            raise ConfigError("reranker 'cross-encoder' needs rerankers.cross_encoder_model (a model name or folder)")
        return CrossEncoderReranker(settings.cross_encoder_model)
    raise ConfigError(f"unknown reranker {name!r} (none, embedding or cross-encoder)")
