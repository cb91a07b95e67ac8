"""`tuner export --to weaviate`: the tuned retrieval as Weaviate hybrid parameters and a snippet that compiles,
with every knob Weaviate cannot reproduce named."""

from __future__ import annotations

import ast

import pytest

from tests.fakes import ScriptedLLM
from tuner.config import KNOBS, Bm25Config, Knob, PipelineConfig, ProjectConfig
from tuner.errors import ConfigError
from tuner.export import weaviate_export


def test_weaviate_parameters_of_a_pipeline():
    exported = weaviate_export(PipelineConfig(top_k=7, alpha=0.3, fusion="ranked", autocut=2), ProjectConfig())
    assert exported.params == {"alpha": 0.3, "fusion_type": "RANKED", "limit": 7, "auto_limit": 2}
    assert exported.not_transferred == []
    assert "fusion_type=HybridFusion.RANKED," in exported.snippet and "auto_limit=2," in exported.snippet
    ast.parse(exported.snippet)  # runnable Python (no server here to run it against)
    # a trial that searched the embedder stored its chunks with that model's vectors: questions are embedded alike
    other = weaviate_export(PipelineConfig(embedder="models/e5-small"), ProjectConfig()).snippet
    assert "SentenceTransformer('models/e5-small')" in other and "all-MiniLM" not in other


def test_what_does_not_transfer_is_named_and_a_foreign_fusion_refused():
    project = ProjectConfig(backend={"bm25": Bm25Config(stemmer="english")}, embedder={"precision": "bf16"})
    pipeline = PipelineConfig(fusion="ranked", rank_constant=20, hops=1, reranker="embedding",
                              confidence_threshold=0.4)
    lost = " | ".join(weaviate_export(pipeline, project).not_transferred)
    for knob in ("rank_constant 20", "hops 1", "reranker embedding", "confidence_threshold 0.4", "stemmer english",
                 "embedder torch bf16"):
        assert knob in lost
    assert "auto_limit" not in weaviate_export(pipeline, project).params
    on_weaviate = ProjectConfig(backend={"type": "weaviate", "bm25": Bm25Config(k1=1.5)})
    # set on the collection: nothing lost
    assert not any("k1" in lost for lost in weaviate_export(PipelineConfig(), on_weaviate).not_transferred)
    index_and_query = " | ".join(weaviate_export(PipelineConfig(query="hyde", chunker="raptor", stemmer="english"),
                                                 ProjectConfig()).not_transferred)
    for knob in ("query hyde", "the index (raptor 150/30", "holds text the generator wrote", "stemmer english"):
        assert knob in index_and_query
    with pytest.raises(ConfigError, match="'zscore', which Weaviate does not have"):
        weaviate_export(PipelineConfig(fusion="zscore"), ProjectConfig())


def test_export_a_finished_study(cli_with, tmp_path):
    tuner = cli_with(ScriptedLLM())
    ran = tuner("optimize", "--trials", "2", "--search-space", "quick", "--limit", "2", "--holdout", "0",
                "--judge-check", "off", "--study", "s")
    assert ran.exit_code == 0, ran.output
    result = tuner("export", "--study", "s", "--to", "weaviate", "--out", "query.py")
    assert result.exit_code == 0, result.output
    assert "alpha" in result.output and "fusion_type" in result.output and "chunks.query.hybrid(" in result.output
    ast.parse((tmp_path / "query.py").read_text())
    assert "--to 'pinecone'" in str(tuner("export", "--study", "s", "--to", "pinecone").exception)
    assert "no trial 99" in str(tuner("export", "--study", "s", "--trial", "99").exception)


def test_every_knob_says_how_it_reaches_weaviate():
    assert set(KNOBS) == set(PipelineConfig.model_fields)
    for name, knob in KNOBS.items():
        assert sum(map(bool, (knob.weaviate, knob.carried, knob.lost))) == 1, name


def test_a_new_knob_that_does_not_transfer_is_named_without_an_edit_to_export(monkeypatch):
    class Planted(PipelineConfig):
        dedupe: bool = False

    monkeypatch.setitem(KNOBS, "dedupe", Knob(lost="dedupe {value} (drop near-duplicate chunks in your application)"))
    assert weaviate_export(Planted(), ProjectConfig()).not_transferred == []  # at its default it does nothing
    lost = weaviate_export(Planted(dedupe=True), ProjectConfig()).not_transferred
    assert lost == ["dedupe True (drop near-duplicate chunks in your application)"]
