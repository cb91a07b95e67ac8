"""Build the searchable index of a dataset: chunks, cached embeddings, BM25 and the entity graph.

A study may search index knobs (chunk size and overlap, chunker, stemmer, contextual): `Indexes` builds each
distinct index once, on first use, and keeps the last few in memory; chunk embeddings are cached by text, so an
index that shares chunks with another embeds only what is new.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tuner.cache import KeyValue, stable_hash
from tuner.config import IndexSettings, ProjectConfig
from tuner.data import Dataset
from tuner.errors import ConfigError, DataError
from tuner.models.embedders import CachedEmbedder, Embedder
from tuner.models.llms import LLM
from tuner.pipeline.backends import RetrievalBackend, make_backend
from tuner.pipeline.chunking import Chunk, chunk_documents
from tuner.pipeline.graph import EntityGraph
from tuner.pipeline.raptor import summaries, summarizing
from tuner.pipeline.retrieval import HybridRetriever
from tuner.pipeline.situate import situating
from tuner.ui import duration

log = logging.getLogger(__name__)
#: word-piece tokens per English word, roughly (MiniLM's 256-token window holds about 190 words)
TOKENS_PER_WORD = 1.3


@dataclass
class Index:
    chunks: list[Chunk]
    vectors: np.ndarray
    backend: RetrievalBackend
    graph: EntityGraph
    settings: IndexSettings
    timings: dict[str, float] = field(default_factory=dict)  # seconds per build step
    embedded: int = 0  # chunks the embedding model computed for this build (the rest came from the cache)
    #: the model of `vectors` (settings.embedder's): a question is searched with it
    embedder: Embedder | None = None
    #: the retriever over this index's backend, with its per-question candidate cache (set on first search)
    retriever: HybridRetriever | None = None

    @property
    def seconds(self) -> float:
        return sum(self.timings.values())


#: (step, done, total) while an index is built: "embedding 5305 chunks", then "BM25 + vector index", "entity graph"
IndexProgress = Callable[[str, int, int], None]


def build_index(dataset: Dataset, config: ProjectConfig, embedder: Embedder,
                on_progress: IndexProgress | None = None, settings: IndexSettings | None = None,
                writer: LLM | None = None) -> Index:
    """The index of `dataset` with `settings` (default: the project's own); `writer` writes what the settings ask
    an LLM for (`contextual: llm`, RAPTOR's summaries)."""
    report = on_progress or (lambda step, done, total: None)
    settings = settings or config.index_settings()
    if settings.writes and writer is None:
        raise ConfigError(f"the index {settings.describe()} is written with the generator LLM: this command has none")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    chunks = chunk_documents(dataset.documents, settings, writer and situating(writer),
                             lambda done, total: report("writing chunk contexts", done, total))
    if not chunks:
        raise DataError(f"{dataset.source}: the corpus has no text to index")
    timings["chunk"] = time.perf_counter() - started
    if embedder.window and settings.chunk_size * TOKENS_PER_WORD > embedder.window:
        log.warning(f"note: chunk_size {settings.chunk_size} words is about "
                    f"{settings.chunk_size * TOKENS_PER_WORD:.0f} tokens, beyond the embedder's window of "
                    f"{embedder.window}: its vectors read only the first "
                    f"~{embedder.window / TOKENS_PER_WORD:.0f} words of each chunk (BM25 reads all of it)")

    started = time.perf_counter()
    computed = embedder.misses if isinstance(embedder, CachedEmbedder) else 0
    vectors = _embed(embedder, [c.text for c in chunks], report)
    timings["embed"] = time.perf_counter() - started
    if settings.chunker == "raptor":
        started = time.perf_counter()
        tree, tree_vectors = summaries(chunks, vectors, summarizing(writer),
                                       lambda texts: _embed(embedder, texts, report),
                                       lambda done, total: report("writing RAPTOR summaries", done, total))
        chunks, vectors = chunks + tree, np.concatenate([vectors, tree_vectors])
        timings["summarise"] = time.perf_counter() - started
    computed = embedder.misses - computed if isinstance(embedder, CachedEmbedder) else len(chunks)

    started = time.perf_counter()
    report("BM25 + vector index", 0, 1)
    backend = make_backend(config.backend.model_copy(update={
        "bm25": config.backend.bm25.model_copy(update={"stemmer": settings.stemmer})}))
    backend.add([c.text for c in chunks], vectors)
    report("BM25 + vector index", 1, 1)
    timings["index"] = time.perf_counter() - started

    started = time.perf_counter()
    report("entity graph", 0, 1)
    graph = EntityGraph(chunks, config.graph.max_entity_share,
                        {doc.id: doc.title for doc in dataset.documents if doc.title}, config.graph.links)
    report("entity graph", 1, 1)
    timings["graph"] = time.perf_counter() - started
    return Index(chunks, vectors, backend, graph, settings, timings, computed, embedder)


#: an embedding expected to take longer than this says how long, once its pace is known (seconds)
SAY_EMBEDDING_TIME = 20.0


def _embed(embedder: Embedder, texts: list[str], report: IndexProgress) -> np.ndarray:
    """The chunks' vectors, with progress; a long embedding says how long it will take at the pace of its first
    batches (the first report is what the cache held, or the first batch: the pace is taken from the next)."""
    step, done = f"embedding {len(texts)} chunks", 0
    report(step, 0, len(texts))
    first: tuple[float, int] | None = None  # when the first report came, and how many were done then
    said = False

    def embedded(count: int) -> None:
        nonlocal done, first, said
        done += count
        report(step, done, len(texts))
        now = time.perf_counter()
        if first is None:
            first = (now, done)
        elif not said and first[1] < done < len(texts):
            said = True
            each = (now - first[0]) / (done - first[1])
            if each * (len(texts) - first[1]) > SAY_EMBEDDING_TIME:
                log.info(f"embedding {len(texts) - first[1]:,} chunks the cache does not hold: about "
                         f"{duration(each * (len(texts) - done))} to go at the pace of the first {done - first[1]:,}")

    return embedder.encode(texts, on_progress=embedded)


class Indexes:
    """The indexes of one dataset, one per IndexSettings, each built on first use; the `keep` last used stay in
    memory (the project's own always).

    What a build pays for (embeddings, LLM-written contexts and summaries) is cached on disk by text, so a rebuild
    costs only chunking and BM25. With `builds` (a store shared by the workers of a study) a build holds a lease on
    its fingerprint (`identity` + settings): a worker needing an index another is building waits for it, then finds
    everything it would pay for cached."""

    def __init__(self, first: Index, build: Callable[[IndexSettings, LLM | None], Index], keep: int = 4,
                 builds: KeyValue | None = None, identity: str = ""):
        self.first = first
        self._build = build
        self._keep = keep
        self._builds, self._identity = builds, identity
        self._recent: dict[IndexSettings, Index] = {}
        #: every index built after the first, in order, with its build seconds: what index knobs cost
        self.built: list[tuple[IndexSettings, float]] = []

    def get(self, settings: IndexSettings, writer: LLM | None = None) -> Index:
        """The index built with `settings`; `writer` writes what they ask an LLM for (the asking run's
        generator, so a trial's index is cached and counted in its cost)."""
        if settings == self.first.settings:
            return self.first
        index = self._recent.pop(settings, None)
        if index is None:
            index = self._leased(settings, writer)
            self.built.append((settings, index.seconds))
            log.info(f"index {settings.describe()}: {len(index.chunks)} chunks ({index.embedded} embedded now) in "
                     f"{index.seconds:.1f} s")
        self._recent[settings] = index  # most recent last
        while len(self._recent) > self._keep:
            self._recent.pop(next(iter(self._recent)))
        return index

    def _leased(self, settings: IndexSettings, writer: LLM | None) -> Index:
        log.info(f"building the index {settings.describe()}")
        if self._builds is None:
            return self._build(settings, writer)
        return leased(self._builds, self._identity, settings, lambda settings: self._build(settings, writer))


def leased(builds: KeyValue, identity: str, settings: IndexSettings,
           build: Callable[[IndexSettings], Index]) -> Index:
    """`build(settings)` under a lease on the index's fingerprint in `builds`: a worker needing an index another is
    building waits for it, then builds it from the cache (embeddings, LLM-written texts) without paying again."""
    key = stable_hash(["index", identity, settings.model_dump()])
    with builds.lease(key) as built:
        index = build(settings)
        if not built:
            builds.put(key, {"settings": settings.model_dump(), "chunks": len(index.chunks),
                             "seconds": round(index.seconds, 3)}, tag="index")
    return index
