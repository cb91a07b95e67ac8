"""One pipeline configuration applied to one question: retrieve -> expand -> rerank -> select."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tuner.config import IndexSettings, PipelineConfig, RerankerConfig
from tuner.errors import ConfigError
from tuner.models.embedders import Embedder
from tuner.models.llms import LLM
from tuner.models.provider import RunModels
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.fusion import fuse
from tuner.pipeline.index import Index, Indexes
from tuner.pipeline.query import RRF_K, Rewrite, rewrite
from tuner.pipeline.rerankers import Reranker, make_reranker
from tuner.pipeline.retrieval import HybridRetriever
from tuner.pipeline.selection import select_autocut, select_dynamic_k


@dataclass(frozen=True)
class RetrievalResult:
    # the fused candidate window, best first (before top_k)
    retrieved: list[Candidate]
    # the top_k seeds plus graph expansions, in retrieval order: what the reranker sees
    pool: list[Candidate]
    # the pool in the reranker's order, with confidences
    reranked: list[Candidate]
    # what reaches the generator
    selected: list[Candidate]
    # the reranker put its own order on the pool (False: the pool is in retrieval-score order)
    reordered: bool = True
    # what the question was searched as (the query strategy's rewrite; None: the question itself)
    rewrite: Rewrite | None = None

    @property
    def ranking(self) -> list[Candidate]:
        """Every candidate the pipeline ranked. A reranker's pool first, then the rest of the fused window; without
        one, the pool and the window merged by score, so a hop's chunk ranks where its score puts it and never
        ahead of a retrieved chunk that scored higher."""
        in_pool = {c.position for c in self.pool}
        rest = [c for c in self.retrieved if c.position not in in_pool]
        if self.reordered:
            return self.reranked + rest
        return sorted(self.reranked + rest, key=lambda c: -c.score)  # stable: ties keep the pool first


class RetrievalPipeline:
    def __init__(self, indexes: Indexes, embedders: Callable[[str], Embedder], rerankers: RerankerConfig,
                 settings_of: Callable[[PipelineConfig], IndexSettings], window: int = 100,
                 models: RunModels | None = None, llm_top_n: int = 5,
                 shared_rerankers: dict[tuple, Reranker] | None = None):
        """`settings_of(config)`: the index a pipeline configuration retrieves from (its embedder's name among
        them); `embedders(name)`: that model, loaded once; `models`: the run's LLMs, which query strategies, the
        LLM reranker and LLM-written index contexts use (None: a command without models, which refuses them).
        `shared_rerankers`: the model-free rerankers of the workspace's pipelines, each model loaded once."""
        self.indexes = indexes
        self.settings_of = settings_of
        self.window = window
        self.embedders = embedders
        self.reranker_settings = rerankers
        self.models = models
        self._llm_top_n = llm_top_n
        self._rerankers: dict[tuple, Reranker] = {} if shared_rerankers is None else shared_rerankers
        self._llm_reranker: Reranker | None = None  # the run's own: it judges with the run's metered judge

    def generator(self, config: PipelineConfig | None = None) -> LLM:
        """The model `config`'s query strategy writes with; None: the project's generator, which writes every
        index's LLM-written contexts and summaries (an index is built once, whichever trial answers from it)."""
        if self.models is None:
            raise ConfigError("this command has no generator LLM to write with")
        return self.models.generator(None if config is None else config.generator)

    def rewrite(self, question: str, config: PipelineConfig) -> Rewrite:
        """What `question` is searched as under `config.query` (calls the generator unless the query is none)."""
        if config.query == "none":
            return Rewrite.plain(question)
        return rewrite(question, config.query, self.generator(config))

    def reranker(self, config: PipelineConfig) -> Reranker:
        """`config`'s reranker with its model: reranker_model, else the project's cross-encoder, or for the
        embedding reranker the trial's embedder."""
        name, model = config.reranker, config.reranker_model
        if name == "llm":
            if self._llm_reranker is None:
                judge = self.models.judge if self.models is not None else None
                self._llm_reranker = make_reranker(name, self.reranker_settings, None, judge, self._llm_top_n)
            return self._llm_reranker
        if name == "embedding":
            model = model or self.settings_of(config).embedder
        key = (name, model if name in ("embedding", "cross-encoder") else None)
        if key not in self._rerankers:
            settings = self.reranker_settings
            if name == "cross-encoder" and model:
                settings = settings.model_copy(update={"cross_encoder_model": model})
            embedder = self.embedders(model) if name == "embedding" else None
            self._rerankers[key] = make_reranker(name, settings, embedder, None, self._llm_top_n)
        return self._rerankers[key]

    @property
    def index(self) -> Index:
        """The project's own index."""
        return self.indexes.first

    @property
    def retriever(self) -> HybridRetriever:
        return self.retriever_of(self.index)

    def retriever_of(self, index: Index) -> HybridRetriever:
        if index.retriever is None:
            index.retriever = HybridRetriever(index.backend, index.embedder or self.embedders(index.settings.embedder),
                                              self.window)
        return index.retriever

    def index_for(self, config: PipelineConfig) -> Index:
        """The index `config` retrieves from, built now if it is the first to need it."""
        settings = self.settings_of(config)
        return self.indexes.get(settings, self.generator() if settings.writes else None)

    def prefetch(self, questions: Sequence[str], config: PipelineConfig) -> None:
        """Fetch the candidates of `questions` for `config`'s index at once (their vectors embedded in batches);
        a query strategy searches rewrites, which only exist per question."""
        if config.query == "none":
            self.retriever_of(self.index_for(config)).prefetch(questions, self.window)

    def run(self, question: str, config: PipelineConfig, rewritten: Rewrite | None = None) -> RetrievalResult:
        """`rewritten`: what the question is searched as (default: `self.rewrite`); several searches are merged by
        reciprocal rank fusion, and the reranker always judges the original question."""
        index = self.index_for(config)
        chunks = index.chunks
        rewritten = rewritten or self.rewrite(question, config)
        retriever = self.retriever_of(index)
        lists = [retriever.search(s.bm25, config.alpha, config.fusion, self.window, config.rank_constant, s.dense)
                 for s in rewritten.searches]
        fused = lists[0] if len(lists) == 1 else fuse([(hits, 1.0) for hits in lists], "ranked", self.window, RRF_K)
        retrieved = [Candidate(int(p), chunks[p], float(s)) for p, s in zip(fused.ids, fused.scores)]
        seeds = retrieved[: config.top_k]
        expanded = index.graph.expand(seeds, chunks, config.hops, config.hop_decay, config.top_k,
                                      dict(zip(fused.ids.tolist(), fused.scores.tolist())))
        pool = sorted(seeds + expanded, key=lambda c: -c.score)  # stable: a seed stays ahead of a tied expansion

        reranker = self.reranker(config)
        confidences = reranker.confidences(question, pool)
        reranked = [replace(c, confidence=float(v)) for c, v in zip(pool, confidences)]
        reranked.sort(key=lambda c: -(c.confidence or 0.0))  # stable: ties keep retrieval order

        if config.confidence_threshold is not None:
            selected = select_dynamic_k(reranked, config.confidence_threshold, config.min_docs, config.max_docs)
        elif config.autocut is not None:
            selected = select_autocut(reranked, config.top_k, config.autocut)
        else:
            selected = reranked[: config.top_k]
        return RetrievalResult(retrieved, pool, reranked, selected, reordered=reranker.reorders,
                               rewrite=None if config.query == "none" else rewritten)
