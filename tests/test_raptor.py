"""RAPTOR as `chunker: raptor`: clusters of leaf embeddings, one summary per cluster, two levels, the summaries
indexed beside the leaves and counted as every document under them; builds cached, counted and leased."""

from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np
import pytest

from tests.fakes import HashingEmbedder, ScriptedLLM
from tuner.config import PipelineConfig, ProjectConfig
from tuner.evaluation.rag_eval import RagRunner
from tuner.evaluation.retrieval_eval import docs
from tuner.evaluation.retrieval_metrics import question_metrics
from tuner.models.embedders import CachedEmbedder
from tuner.models.provider import Models
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import Chunk
from tuner.pipeline.raptor import CLUSTER_SIZE, clusters, summaries
from tuner.workspace import open_workspace

RAPTOR = PipelineConfig(chunker="raptor")


def test_clusters_are_the_groups_of_the_embedding_space():
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:3] * 10
    vectors = np.concatenate([centre + rng.normal(0, 0.1, (CLUSTER_SIZE, 8)) for centre in centres])
    order = rng.permutation(len(vectors))  # the blobs interleaved in corpus order
    groups = clusters(vectors[order])
    blob = {position: int(original) // CLUSTER_SIZE for position, original in enumerate(order)}
    assert sorted(sorted(blob[p] for p in g) for g in groups) == [[b] * CLUSTER_SIZE for b in range(3)]
    assert all(g == sorted(g) for g in groups)  # corpus order within a cluster
    assert clusters(vectors[:1]) == [] and clusters(vectors[:3]) == [[0, 1, 2]]


def test_summaries_of_two_levels_cover_the_documents_under_them():
    leaves = [Chunk(f"d{i % 7}#{i}", f"d{i % 7}", f"leaf {i} about topic {i % 5} " * 3) for i in range(40)]
    embedder = HashingEmbedder()
    asked: list[list[str]] = []

    def summarize(texts):
        asked.append(list(texts))
        return f"summary {len(asked)}: " + " ".join(t.split()[3] for t in texts)  # its members" topics

    tree, vectors = summaries(leaves, embedder.encode([c.text for c in leaves]), summarize, embedder.encode)
    levels = [c.level for c in tree]
    assert levels == sorted(levels) and set(levels) == {1, 2} and len(tree) == len(asked) == len(vectors)
    assert sum(level == 1 for level in levels) <= -(-len(leaves) // 2)  # at most one summary per two leaves
    leaves_under = {c.text: Counter([c.doc_id]) for c in leaves}  # per node: its leaves per document
    for summary, texts in zip(tree, asked):
        under = leaves_under[summary.text] = sum((leaves_under[t] for t in texts), Counter())
        assert set(summary.covers) == set(under) and summary.doc_id == summary.covers[0]
        counts = [under[doc] for doc in summary.covers]
        assert counts == sorted(counts, reverse=True)  # most-represented document first
    assert np.allclose(vectors, embedder.encode([c.text for c in tree]))


def test_a_summary_counts_as_every_gold_document_under_it_and_takes_one_place():
    summary = Chunk("raptor1#0", "d2", "s", covers=("d2", "d1", "d4"), level=1)
    ranked = [Candidate(0, summary, 0.9), Candidate(1, Chunk("d3#0", "d3", "t"), 0.5)]
    assert docs(ranked, frozenset({"d1", "d4"})) == ["d1", "d4", "d3"]  # both gold documents found at rank 1
    assert docs(ranked, frozenset({"d3"})) == ["d2", "d3"]  # no gold under it: one place, not three
    metrics = question_metrics(docs(ranked, frozenset({"d1"})), docs(ranked[:1], frozenset({"d1"})), {"d1"}, 1)
    assert metrics["recall@1"] == 1.0 and metrics["mrr"] == 1.0 and metrics["precision"] == 1.0


@pytest.fixture
def runner(tmp_path):
    def make(llm, embedder=None):
        workspace = open_workspace(ProjectConfig(cache_dir=tmp_path), limit=6, embedder=embedder or HashingEmbedder())
        return RagRunner(workspace, models=Models(llm, llm))
    return make


def test_a_raptor_index_is_built_by_the_trial_that_needs_it_cached_and_counted(runner):
    llm = ScriptedLLM()
    first = runner(llm).evaluate(RAPTOR, answer=False)
    index = first.cost_by_stage["index"]
    assert index.llm_calls == len(llm.calls) > 0  # one call per cluster, counted in the trial's index cost
    assert first.retrieval["questions_scored"] == 6 and first.retrieval["recall@10"] > 0
    again = runner(ScriptedLLM()).evaluate(RAPTOR, answer=False)  # a new process on the same cache
    assert again.cost_by_stage["index"].llm_calls == 0 and again.cost_by_stage["index"].cache_hits == index.llm_calls
    assert again.retrieval == first.retrieval


class SlowEmbedder(HashingEmbedder):
    """Takes a while per batch, as a real model does: a second build started meanwhile would overlap it."""

    def encode(self, texts, on_progress=None):
        time.sleep(0.05)
        return super().encode(texts, on_progress)


def test_a_worker_needing_an_index_another_is_building_waits_and_pays_nothing(runner, tmp_path):
    workers = [runner(ScriptedLLM(), CachedEmbedder(SlowEmbedder(), tmp_path)) for _ in range(2)]
    sentences = PipelineConfig(chunker="sentences", chunk_size=20, chunk_overlap=5)
    errors: list[BaseException] = []

    def build(worker):
        try:
            worker.pipeline.index_for(sentences)
        except BaseException as exc:  # re-raised by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    built = [w.pipeline.indexes.get(w.workspace.config.index_settings(sentences)) for w in workers]
    waited, paid = sorted(i.embedded for i in built)
    assert waited == 0 < paid  # one of them embedded (without the lease, both do), the other waited for it
    assert [c.text for c in built[0].chunks] == [c.text for c in built[1].chunks]


@pytest.mark.slow
def test_raptor_with_the_real_small_model_through_the_cli(small_gguf, tmp_path):
    """3 one-chunk documents: one cluster, one summary the 0.5B model writes, indexed beside the leaves and
    counted as all three documents; run again, the summary comes from the cache."""
    from tests.helpers import llm_calls_cached, written_index_twice

    first, again = written_index_twice(tmp_path, small_gguf, "chunker=raptor")
    assert first["dataset"]["chunks"] == 4 and first["retrieval"]["recall@5"] == 1.0
    assert llm_calls_cached(tmp_path / "cache") == 1  # one summary, not paid again the second time
    summary = [p for q in first["per_question"] for p in q["selected"] if p["chunk_id"].startswith("raptor1#")]
    assert summary and len(summary[0]["text"].split()) >= 5  # the model wrote a summary, and it was retrieved
    assert [[p["text"] for p in q["selected"]] for q in again["per_question"]] == \
        [[p["text"] for p in q["selected"]] for q in first["per_question"]]


@pytest.mark.slow
def test_the_model_that_wrote_the_projects_own_index_then_answers(small_gguf, tmp_path):
    """The project's own index is RAPTOR's, written before any evaluation by the generator, which then answers:
    writing the index must leave the one loaded model usable (a GGUF loads once per process)."""
    from tests.helpers import three_documents
    from tuner.config import load_config

    three_documents(tmp_path, small_gguf)
    project = load_config(tmp_path / "tuner.yaml").model_copy(update={"cache_dir": tmp_path / "cache"})
    project = project.model_copy(update={"chunking": project.chunking.model_copy(update={"chunker": "raptor"}),
                                         "dataset": project.dataset.model_copy(update={"path": tmp_path / "set"})})
    runner = RagRunner(open_workspace(project, limit=1, embedder=HashingEmbedder()))
    assert any(c.level == 1 for c in runner.workspace.index.chunks)
    result = runner.evaluate(project.pipeline, metrics=[])
    assert result.questions[0].answer and result.questions[0].generation_error is None
