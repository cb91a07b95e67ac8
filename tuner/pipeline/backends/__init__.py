"""Retrieval backends behind one contract (`RetrievalBackend`)."""

from tuner.config import BackendConfig
from tuner.pipeline.backends._base import Hits, RetrievalBackend
from tuner.pipeline.backends._embedded import EmbeddedBackend

__all__ = ["Hits", "RetrievalBackend", "EmbeddedBackend", "make_backend"]


def make_backend(config: BackendConfig) -> RetrievalBackend:
    if config.type == "embedded":
        bm25 = config.bm25
        return EmbeddedBackend(k1=bm25.k1, b=bm25.b, stopwords=bm25.stopwords, stemmer=bm25.stemmer)
    raise ValueError(f"unknown backend {config.type!r}")
