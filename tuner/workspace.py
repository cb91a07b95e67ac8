"""Everything a command needs for one project config: the dataset, the embedder, the indexes, the models, and the
pipeline over them (`pipeline_with` gives a run its own, with its metered models)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tuner.cache import open_store, stable_hash
from tuner.config import ProjectConfig
from tuner.data import Dataset, load_dataset
from tuner.models.embedders import Embedder, make_embedder
from tuner.models.llms import LLM
from tuner.models.provider import ModelProvider, Models, RunModels
from tuner.pipeline.index import Index, Indexes, IndexProgress, build_index, leased
from tuner.pipeline.rerankers import Reranker
from tuner.pipeline.run import RetrievalPipeline


@dataclass
class Workspace:
    config: ProjectConfig
    dataset: Dataset
    embedder: Embedder
    #: the project's own index; None with the user's own `system:`, which retrieves for itself
    index: Index | None
    #: the indexes of the dataset, one per index settings, shared by every pipeline of the workspace (None: as above)
    indexes: Indexes | None
    #: the embedder knob's models by name, each loaded once
    embedders: Callable[[str], Embedder]
    #: the language models, loaded on first use
    models: ModelProvider
    #: where LLM calls and embeddings are cached: a folder, or the database of a study kept in one
    cache: Path | str
    #: the model-free rerankers every pipeline of the workspace shares (a cross-encoder loads once)
    rerankers: dict[tuple, Reranker] = field(default_factory=dict)

    def pipeline_with(self, models: RunModels | None) -> RetrievalPipeline:
        """A pipeline over the workspace's indexes whose LLM work (query strategies, the LLM reranker, LLM-written
        index contexts) goes to `models`: a run's own, behind its meter."""
        return RetrievalPipeline(self.indexes, self.embedders, self.config.rerankers, self.config.index_settings,
                                 self.config.backend.candidates, models, self.config.evaluation.llm_rerank_top_n,
                                 self.rerankers)

    @functools.cached_property
    def pipeline(self) -> RetrievalPipeline:
        """Retrieval without language models (a command that refuses LLM work in one line when asked for it)."""
        return self.pipeline_with(None)


def open_workspace(config: ProjectConfig, dataset_path: Path | None = None, limit: int | None = None,
                   embedder: Embedder | None = None, dataset: Dataset | None = None,
                   cache: Path | str | None = None, on_progress: IndexProgress | None = None,
                   models: Models | None = None) -> Workspace:
    """Load data (unless given, already loaded) and build the index (reporting to `on_progress`); `dataset_path`
    and `limit` override the config's, `cache` its cache_dir; `models`: language models handed in instead of the
    config's."""
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

    provider = ModelProvider(config, models)
    if config.system is not None:  # the user's system retrieves for itself: embedding the corpus would be waste
        return Workspace(config, dataset, embedder, None, None, embedder_named, provider, cache)
    builds, identity = open_store(cache, "indexes"), stable_hash([embedder.name, corpus_identity(dataset)])
    # the writer is not closed after: a GGUF loads once per process, and the evaluation's generator is this model
    index = leased(builds, identity, config.index_settings(), lambda settings: build_index(
        dataset, config, embedder, on_progress, settings, writer=own_writer(provider, cache)))
    # a trial's index writes (LLM contexts, RAPTOR summaries) with the asking run's generator: cached, and counted
    # in the trial's cost
    indexes = Indexes(index, lambda settings, writer: build_index(
        dataset, config, embedder_named(settings.embedder), settings=settings, writer=writer),
        builds=builds, identity=identity)
    return Workspace(config, dataset, embedder, index, indexes, embedder_named, provider, cache)


def corpus_identity(dataset: Dataset) -> str:
    """What the documents are (ids and texts), whatever folder or format they came from."""
    return stable_hash([(doc.id, doc.title, doc.text) for doc in dataset.documents])


def own_writer(provider: ModelProvider, cache: Path | str) -> LLM | None:
    """The generator that writes the project's own index (`contextual: llm`, `chunker: raptor`), built before any
    evaluation: through the shared LLM cache, so a rebuild pays nothing. None when the index needs no writer."""
    if not provider.project.index_settings().writes:
        return None
    from tuner.cost import CostMeter

    return provider.metered(open_store(cache, "llm_calls"), CostMeter()).generator()
