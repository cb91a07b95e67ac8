"""Rerankers behind one contract (`Reranker`): none, embedding (bi-encoder), cross-encoder, llm (pointwise)."""

from __future__ import annotations

from tuner.config import RerankerConfig
from tuner.errors import ConfigError
from tuner.models.embedders import Embedder
from tuner.models.llms import LLM
from tuner.pipeline.rerankers._base import Reranker
from tuner.pipeline.rerankers._cross_encoder import CrossEncoderReranker
from tuner.pipeline.rerankers._embedding import EmbeddingReranker
from tuner.pipeline.rerankers._llm import LLMReranker
from tuner.pipeline.rerankers._none import NoReranker

__all__ = ["Reranker", "NoReranker", "EmbeddingReranker", "CrossEncoderReranker", "LLMReranker", "make_reranker"]


def make_reranker(name: str, settings: RerankerConfig, embedder: Embedder, llm: LLM | None = None,
                  llm_top_n: int = 5) -> Reranker:
    if name == "none":
        return NoReranker()
    if name == "embedding":
        return EmbeddingReranker(embedder, settings.embedding_midpoint, settings.embedding_temperature)
    if name == "cross-encoder":
        if not settings.cross_encoder_model:
            raise ConfigError("reranker 'cross-encoder' needs rerankers.cross_encoder_model (a model name or folder)")
        return CrossEncoderReranker(settings.cross_encoder_model)
    if name == "llm":
        if llm is None:
            raise ConfigError("reranker 'llm' needs a language model: it is not available with --retrieval-only")
        return LLMReranker(llm, llm_top_n)
    raise ConfigError(f"unknown reranker {name!r} (none, embedding, cross-encoder or llm)")
