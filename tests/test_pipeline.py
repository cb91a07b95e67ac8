"""The retrieval pipeline end to end: real embeddings on the demo set, plumbing with fakes."""

import pytest

from tuner.config import PipelineConfig, ProjectConfig
from tuner.errors import ConfigError
from tuner.evaluation.rag_eval import RagRunner
from tuner.pipeline.index import build_index
from tuner.pipeline.selection import autocut
from tuner.workspace import open_workspace


@pytest.fixture(scope="session")
def demo(real_embedder, tmp_path_factory):
    config = ProjectConfig(cache_dir=tmp_path_factory.mktemp("cache"))
    return open_workspace(config, embedder=real_embedder)


@pytest.fixture
def counted(fake_embedder, tmp_path):
    """A demo workspace on the hashing embedder whose backend counts its queries."""
    workspace = open_workspace(ProjectConfig(cache_dir=tmp_path), embedder=fake_embedder)
    backend = workspace.index.backend
    calls = {"bm25": 0, "dense": 0}
    for name in calls:
        original = getattr(backend, name)

        def counting(*args, _original=original, _name=name):
            calls[_name] += 1
            return _original(*args)

        setattr(backend, name, counting)
    return workspace, calls


def test_real_retrieval_on_the_demo_finds_the_gold_documents(demo):
    result = RagRunner(demo).evaluate(PipelineConfig(top_k=5, alpha=0.5), answer=False)
    assert result.retrieval["recall@5"] >= 0.9
    assert result.retrieval["mean_k"] == 5
    assert len(result.questions) == len(demo.dataset.questions) and not result.metrics and not result.models


def test_alpha_changes_the_ranking_between_bm25_and_vector(demo):
    question = demo.dataset.questions[8].text
    bm25_only = demo.pipeline.run(question, PipelineConfig(alpha=0.0, top_k=10)).selected
    vector_only = demo.pipeline.run(question, PipelineConfig(alpha=1.0, top_k=10)).selected
    assert [c.position for c in bm25_only] != [c.position for c in vector_only]


def test_candidates_are_fetched_once_per_question_and_refused_per_alpha(counted):
    workspace, calls = counted
    question = workspace.dataset.questions[0].text
    first = workspace.pipeline.run(question, PipelineConfig(alpha=0.3))
    for alpha in (0.0, 0.5, 0.9, 1.0):
        for fusion in ("relative_score", "ranked"):
            workspace.pipeline.run(question, PipelineConfig(alpha=alpha, fusion=fusion))
    assert calls == {"bm25": 1, "dense": 1}
    again = workspace.pipeline.run(question, PipelineConfig(alpha=0.3))
    assert [c.position for c in again.ranking] == [c.position for c in first.ranking]


def test_an_evaluation_embeds_its_questions_in_one_batch_and_fetches_each_once(counted):
    """One question at a time, the embedder ran a batch of one per question: most of a study's first trial."""
    workspace, calls = counted
    embedder, questions = workspace.embedder, len(workspace.dataset.questions)
    before = embedder.calls, embedder.texts_encoded
    RagRunner(workspace).evaluate(PipelineConfig(), answer=False)
    RagRunner(workspace).evaluate(PipelineConfig(alpha=0.2, top_k=3, fusion="ranked"), answer=False)
    assert (embedder.calls - before[0], embedder.texts_encoded - before[1]) == (1, questions)
    assert calls == {"bm25": questions, "dense": questions}


def test_graph_hops_bring_in_the_second_document_of_a_multi_hop_question(demo):
    question = next(q for q in demo.dataset.questions if q.id == "q03")  # bridge -> its engineer -> birthplace
    config = PipelineConfig(top_k=1, alpha=0.0)
    plain = demo.pipeline.run(question.text, config)
    expanded = demo.pipeline.run(question.text, config.model_copy(update={"hops": 1}))
    assert [c.chunk.doc_id for c in plain.selected] == ["greywater-bridge"]
    hop_docs = {c.chunk.doc_id for c in expanded.ranking if c.hop == 1}
    assert "ilsa-marrow" in hop_docs


def test_without_a_reranker_hops_merge_into_the_window_by_score(demo):
    for question in demo.dataset.questions:
        for hops in (0, 1, 2):
            result = demo.pipeline.run(question.text, PipelineConfig(top_k=5, hops=hops))
            scores = [c.score for c in result.ranking]
            assert scores == sorted(scores, reverse=True)  # no hop's chunk jumps a retrieved chunk that scored higher
            assert len({c.position for c in result.ranking}) == len(result.ranking)
            assert result.selected == result.ranking[:5]


def test_autocut_keeps_what_weaviate_would_of_the_top_k(demo):
    cut_somewhere = 0
    for question in demo.dataset.questions:
        whole = demo.pipeline.run(question.text, PipelineConfig(top_k=10))
        cut = demo.pipeline.run(question.text, PipelineConfig(top_k=10, autocut=1))
        assert cut.selected == whole.selected[: autocut([c.score for c in whole.selected], 1)]
        cut_somewhere += len(cut.selected) < 10
    assert cut_somewhere > len(demo.dataset.questions) / 2


def test_dynamic_k_with_a_reranker_raises_precision(demo):
    fixed = PipelineConfig(top_k=10, reranker="embedding")
    gated = fixed.model_copy(update={"confidence_threshold": 0.6, "max_docs": 10})
    fixed_result = RagRunner(demo).evaluate(fixed, answer=False).retrieval
    gated_result = RagRunner(demo).evaluate(gated, answer=False).retrieval
    assert gated_result["mean_k"] < fixed_result["mean_k"]
    assert gated_result["precision"] > 2 * fixed_result["precision"]
    assert gated_result["recall@k"] >= 0.8


def test_selected_is_top_k_without_threshold_and_ranking_covers_the_window(counted):
    workspace, _ = counted
    result = workspace.pipeline.run("Who designed the Greywater Bridge?", PipelineConfig(top_k=3, hops=2))
    assert len(result.selected) == 3
    assert len({c.position for c in result.ranking}) == len(result.ranking) >= 3


@pytest.mark.parametrize("knobs", [{"chunk_size": 12, "chunk_overlap": 0},  # the demo's documents: 17-40 words
                                   {"chunker": "sentences", "chunk_size": 12, "chunk_overlap": 8},
                                   {"chunker": "sections", "chunk_size": 12, "chunk_overlap": 8},
                                   {"stemmer": "english"}, {"contextual": "none"}, {"contextual": "title_path"}])
def test_index_knobs_retrieve_from_their_own_index_built_once(demo, knobs):
    runner = RagRunner(demo)
    config = PipelineConfig(**knobs)
    first, again = (runner.evaluate(config, answer=False) for _ in range(2))
    assert "index" in first.cost_by_stage and "index" not in again.cost_by_stage  # built once, its cost said
    assert "index" not in runner.evaluate(PipelineConfig(), answer=False).cost_by_stage  # the project's own
    index = demo.pipeline.index_for(config)
    assert index is not demo.index and index.settings == demo.config.index_settings(config)
    selected = [p for q in first.questions for p in q.selected]
    assert selected and all(p.chunk_id in {c.id for c in index.chunks} for p in selected)
    assert first.retrieval["recall@10"] >= 0.8  # a working index, scored by document ids whatever the chunks
    if "chunk_size" in knobs:
        assert len(index.chunks) > len(demo.index.chunks)
        titles = {d.id: len(d.title.split()) for d in demo.dataset.documents}
        assert all(len(c.text.split()) <= 12 + titles[c.doc_id] for c in index.chunks)  # the size, and the title
    if knobs.get("contextual") == "none":
        titled = {d.id: d.title for d in demo.dataset.documents if d.title}
        assert any(not c.text.startswith(titled[c.doc_id]) for c in index.chunks if c.doc_id in titled)


def test_llm_written_contexts_are_one_cached_call_per_chunk_counted_as_the_index_cost(fake_embedder, tmp_path):
    from tests.fakes import ScriptedLLM
    from tuner.models.provider import Models

    llm = ScriptedLLM()
    runner = RagRunner(open_workspace(ProjectConfig(cache_dir=tmp_path), limit=2, embedder=fake_embedder),
                       models=Models(llm, llm))
    config = PipelineConfig(contextual="llm")
    first = runner.evaluate(config, answer=False)
    index = runner.pipeline.index_for(config)
    assert first.cost_by_stage["index"].llm_calls == len(index.chunks) == len(llm.calls) == 35
    written = llm.calls[0]["messages"][0]["content"]
    assert "<document>" in written and "<chunk>" in written  # the model read the chunk inside its document
    assert all(c.text.startswith("[[ ## answer ## ]] The Sorrel Bridge [1].") for c in index.chunks)
    rebuilt = RagRunner(open_workspace(ProjectConfig(cache_dir=tmp_path), limit=2, embedder=fake_embedder),
                        models=Models(llm, llm)).evaluate(config, answer=False)
    assert rebuilt.cost_by_stage["index"].llm_calls == 0 and len(llm.calls) == 35  # every context from the cache
    with pytest.raises(ConfigError, match="is written with the generator LLM: this command has none"):
        build_index(runner.workspace.dataset, ProjectConfig(), fake_embedder, settings=ProjectConfig().index_settings(
            config))


def test_two_runners_on_one_workspace_count_only_their_own_calls_and_models_are_swapped_in_one_place(
        fake_embedder, tmp_path, monkeypatch):
    from tests.fakes import ScriptedLLM

    loaded = []
    # the provider is the one place that turns a model config into a model: swapping it swaps every run's
    monkeypatch.setattr("tuner.models.provider.make_llm", lambda config: loaded.append(config.model) or llm)
    llm = ScriptedLLM()
    workspace = open_workspace(ProjectConfig(cache_dir=tmp_path), limit=2, embedder=fake_embedder)
    first, second = RagRunner(workspace, use_cache=False), RagRunner(workspace, use_cache=False)
    assert first.meter is not second.meter and first.pipeline is not second.pipeline
    assert first.pipeline.indexes is second.pipeline.indexes  # the indexes are the workspace's, built once
    rewritten = PipelineConfig(query="multi_query", reranker="llm")
    first.evaluate(rewritten, answer=False)
    assert first.meter.total().llm_calls > 0 and second.meter.total().llm_calls == 0
    assert loaded  # the rewrite and the LLM reranker went through the provider
    # a command without models refuses LLM work in one line instead of reaching for a model
    with pytest.raises(ConfigError, match="no generator LLM to write with"):
        workspace.pipeline.rewrite("Who?", PipelineConfig(query="hyde"))


def test_a_long_embedding_says_how_long_it_will_take_at_its_first_batches_pace(monkeypatch, caplog):
    """The first report is what the cache held; the pace comes from the batches after it, said once."""
    import logging
    import time

    from tuner.pipeline import index

    class Slow:
        def encode(self, texts, on_progress):
            on_progress(20)  # held by the cache
            for _ in range(20, len(texts), 10):
                time.sleep(0.02)
                on_progress(10)
            return [[0.0, 0.0]] * len(texts)

    monkeypatch.setattr(index, "SAY_EMBEDDING_TIME", 0.05)
    with caplog.at_level(logging.INFO, logger="tuner"):
        index._embed(Slow(), ["text"] * 80, lambda step, done, total: None)
    said = [r.getMessage() for r in caplog.records if "to go" in r.getMessage()]
    assert said == ["embedding 60 chunks the cache does not hold: about 0 s to go at the pace of the first 10"]
    caplog.clear()
    monkeypatch.setattr(index, "SAY_EMBEDDING_TIME", 60.0)  # a short one says nothing
    with caplog.at_level(logging.INFO, logger="tuner"):
        index._embed(Slow(), ["text"] * 80, lambda step, done, total: None)
    assert not [r for r in caplog.records if "to go" in r.getMessage()]
