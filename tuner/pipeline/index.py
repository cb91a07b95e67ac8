"""Build the searchable index of a dataset: chunks, cached embeddings, BM25 and the entity graph."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tuner.config import ProjectConfig
from tuner.data import Dataset
from tuner.errors import DataError
from tuner.models.embedders import CachedEmbedder, Embedder
from tuner.pipeline.backends import RetrievalBackend, make_backend
from tuner.pipeline.chunking import Chunk, chunk_documents
from tuner.pipeline.graph import EntityGraph


@dataclass
class Index:
    chunks: list[Chunk]
    vectors: np.ndarray
    backend: RetrievalBackend
    graph: EntityGraph
    timings: dict[str, float] = field(default_factory=dict)  # seconds per build step
    embedded: int = 0  # chunks the embedding model computed for this build (the rest came from the cache)


#: (step, done, total) while an index is built: "embedding 5305 chunks", then "BM25 + vector index", "entity graph"
IndexProgress = Callable[[str, int, int], None]


def build_index(dataset: Dataset, config: ProjectConfig, embedder: Embedder,
                on_progress: IndexProgress | None = None) -> Index:
    report = on_progress or (lambda step, done, total: None)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    chunks = chunk_documents(dataset.documents, config.chunking.size, config.chunking.overlap)
    if not chunks:
        raise DataError(f"{dataset.source}: the corpus has no text to index")
    timings["chunk"] = time.perf_counter() - started

    started = time.perf_counter()
    step, done = f"embedding {len(chunks)} chunks", 0
    report(step, 0, len(chunks))

    def embedded(count: int) -> None:
        nonlocal done
        done += count
        report(step, done, len(chunks))

    computed = embedder.misses if isinstance(embedder, CachedEmbedder) else 0
    vectors = embedder.encode([c.text for c in chunks], on_progress=embedded)
    computed = embedder.misses - computed if isinstance(embedder, CachedEmbedder) else len(chunks)
    timings["embed"] = time.perf_counter() - started

    started = time.perf_counter()
    report("BM25 + vector index", 0, 1)
    backend = make_backend(config.backend)
    backend.add([c.text for c in chunks], vectors)
    report("BM25 + vector index", 1, 1)
    timings["index"] = time.perf_counter() - started

    started = time.perf_counter()
    report("entity graph", 0, 1)
    graph = EntityGraph(chunks, config.graph.max_entity_share,
                        {doc.id: doc.title for doc in dataset.documents if doc.title}, config.graph.links)
    report("entity graph", 1, 1)
    timings["graph"] = time.perf_counter() - started
    return Index(chunks, vectors, backend, graph, timings, computed)
