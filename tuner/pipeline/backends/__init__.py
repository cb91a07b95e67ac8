"""Retrieval backends behind one contract (`RetrievalBackend`)."""

from tuner.config import BackendConfig
from tuner.pipeline.backends._base import Hits, RetrievalBackend
from tuner.pipeline.backends._embedded import EmbeddedBackend

__all__ = ["Hits", "RetrievalBackend", "EmbeddedBackend", "make_backend"]


def make_backend(config: BackendConfig) -> RetrievalBackend:
    bm25 = config.bm25
    if config.type == "embedded":
        return EmbeddedBackend(k1=bm25.k1, b=bm25.b, stopwords=bm25.stopwords, stemmer=bm25.stemmer)
    if config.type == "weaviate":
        from tuner.pipeline.backends._weaviate import WeaviateBackend  # weaviate-client is an extra

        return WeaviateBackend(config.weaviate, bm25)
    raise ValueError(f"unknown backend {config.type!r}")
