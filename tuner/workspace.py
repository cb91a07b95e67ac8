"""Everything a command needs for one project config: the dataset, the embedder, the index, the pipeline."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from tuner.cache import open_store, stable_hash
from tuner.config import ProjectConfig
from tuner.data import Dataset, load_dataset
from tuner.models.embedders import Embedder, make_embedder
from tuner.models.llms import LLM
from tuner.pipeline.index import Index, Indexes, IndexProgress, build_index, leased
from tuner.pipeline.run import RetrievalPipeline


@dataclass
class Workspace:
    config: ProjectConfig
    dataset: Dataset
    embedder: Embedder
    index: Index
    pipeline: RetrievalPipeline
    #: where LLM calls and embeddings are cached: a folder, or the database of a study kept in one
    cache: Path | str


def open_workspace(config: ProjectConfig, dataset_path: Path | None = None, limit: int | None = None,
                   embedder: Embedder | None = None, dataset: Dataset | None = None,
                   cache: Path | str | None = None, on_progress: IndexProgress | None = None) -> Workspace:
    """Load data (unless given, already loaded) and build the index (reporting to `on_progress`); `dataset_path`
    and `limit` override the config's, `cache` its cache_dir."""
    cache = cache if cache is not None else config.cache_dir
    dataset = dataset or load_dataset(
        dataset_path if dataset_path is not None else config.dataset.path,
        config.dataset.format if dataset_path is None else "auto",
        limit if limit is not None else config.dataset.limit,
    )
    embedder = embedder or make_embedder(config.embedder, cache)

    @functools.cache
    def embedder_named(name: str) -> Embedder:  # the embedder knob's models, each loaded once
        return embedder if name == config.embedder.model else make_embedder(config.embedder_named(name), cache)

    builds, identity = open_store(cache, "indexes"), stable_hash([embedder.name, corpus_identity(dataset)])
    # the writer is not closed after: a GGUF loads once per process, and the evaluation's generator is this model
    index = leased(builds, identity, config.index_settings(), lambda settings: build_index(
        dataset, config, embedder, on_progress, settings, writer=own_writer(config, cache)))
    # a trial's index writes (LLM contexts, RAPTOR summaries) with the evaluation's generator: cached, and counted
    # in the trial's cost
    indexes = Indexes(index, lambda settings: build_index(
        dataset, config, embedder_named(settings.embedder), settings=settings,
        writer=pipeline.generator() if settings.writes else None), builds=builds, identity=identity)
    pipeline = RetrievalPipeline(indexes, embedder_named, config.rerankers, config.index_settings,
                                 window=config.backend.candidates)
    return Workspace(config, dataset, embedder, index, pipeline, cache)


def corpus_identity(dataset: Dataset) -> str:
    """What the documents are (ids and texts), whatever folder or format they came from."""
    return stable_hash([(doc.id, doc.title, doc.text) for doc in dataset.documents])


def own_writer(config: ProjectConfig, cache: Path | str) -> LLM | None:
    """The generator that writes the project's own index (`contextual: llm`, `chunker: raptor`), built before any
    evaluation: through the shared LLM cache, so a rebuild pays nothing. None when the index needs no writer."""
    if not config.index_settings().writes:
        return None
    from tuner.cost import CostMeter
    from tuner.models.llms import CachedLLM, make_llm

    return CachedLLM(make_llm(config.generator), open_store(cache, "llm_calls"), CostMeter())
