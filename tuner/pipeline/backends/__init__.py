"""Retrieval backends behind one contract (`RetrievalBackend`)."""

from tuner.pipeline.backends._base import Hits, RetrievalBackend
from tuner.pipeline.backends._embedded import EmbeddedBackend

__all__ = ["Hits", "RetrievalBackend", "EmbeddedBackend", "make_backend"]


def make_backend(kind: str) -> RetrievalBackend:
    if kind == "embedded":
        return EmbeddedBackend()
    raise ValueError(f"unknown backend {kind!r}")
