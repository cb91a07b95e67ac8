"""Embedders: a small contract, the sentence-transformers implementation, and the cache."""

from __future__ import annotations

from pathlib import Path

from tuner.config import EmbedderConfig
from tuner.models.embedders._base import Embedder, normalise
from tuner.models.embedders._cache import CachedEmbedder
from tuner.models.embedders._sentence_transformers import (
    BUNDLED_MODELS,
    SentenceTransformerEmbedder,
    resolve_model_path,
)

__all__ = ["BUNDLED_MODELS", "Embedder", "CachedEmbedder", "SentenceTransformerEmbedder", "normalise",
           "resolve_model_path", "make_embedder"]


def make_embedder(config: EmbedderConfig, cache: Path | str) -> Embedder:
    """The project's embedder, behind the cache (a folder, or a study's database)."""
    return CachedEmbedder(SentenceTransformerEmbedder(config.model, batch_size=config.batch_size,
                                                      backend=config.backend, precision=config.precision,
                                                      threads=config.threads), cache)
