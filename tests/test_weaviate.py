"""The Weaviate backend without a Weaviate server: its schema, ingestion, queries and result mapping through the
real weaviate-client against the in-process fake (tests/fake_weaviate.py), and `tuner index --check-hybrid`. The
backend contract is in test_backends.py; tuner's fusion against Weaviate's Go, ties included, in test_fusion.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("weaviate", reason="needs the weaviate extra")

from tests.fake_weaviate import free_port
from tests.fakes import HashingEmbedder
from tests.helpers import TEXTS
from tuner.config import Bm25Config, WeaviateConfig
from tuner.errors import ConfigError
from tuner.pipeline.backends._weaviate import (
    WeaviateBackend,
    chunk_position,
    chunk_uuid,
    collection_name,
    connection_arguments,
    corpus_fingerprint,
)
from tuner.pipeline.fusion_check import check_fusion

VECTORS = HashingEmbedder().encode(TEXTS)


def connect(server, **settings) -> WeaviateBackend:
    bm25 = settings.pop("bm25", Bm25Config())
    return WeaviateBackend(WeaviateConfig(url=server.url, grpc_port=server.grpc_port, **settings), bm25)


def requests_since(server, start: int) -> list[str]:
    return [kind for kind, _ in server.requests[start:]]


def test_uuids_sort_as_chunk_positions_and_name_the_corpus():
    fingerprint = corpus_fingerprint(TEXTS, VECTORS, Bm25Config())
    ids = [chunk_uuid(fingerprint, p) for p in (0, 1, 9, 10, 255, 4096, 10**9)]
    assert ids == sorted(ids)  # Weaviate's last tie-break (UUID order) is chunk order
    assert [chunk_position(i) for i in ids] == [0, 1, 9, 10, 255, 4096, 10**9]
    other = [corpus_fingerprint(TEXTS[:4], VECTORS[:4], Bm25Config()),
             corpus_fingerprint(TEXTS, VECTORS + 0.01, Bm25Config()),
             corpus_fingerprint(TEXTS, VECTORS, Bm25Config(k1=1.5))]
    assert len({fingerprint, *other}) == 4  # new chunks, vectors or BM25 settings: a new collection
    assert collection_name("Tuner", fingerprint) == f"Tuner_{fingerprint[:16]}"


def test_the_collection_is_created_with_tuners_vectors_and_bm25_settings(fake_weaviate):
    start = len(fake_weaviate.requests)
    backend = connect(fake_weaviate, collection_prefix="TunerSchema", bm25=Bm25Config(k1=1.5, b=0.5, stopwords="none"))
    backend.add(TEXTS, VECTORS)
    schema = next(body for kind, body in fake_weaviate.requests[start:] if kind == "rest POST /v1/schema")
    assert schema["class"] == backend.name and backend.name.startswith("TunerSchema_")
    assert len(schema["properties"]) == 1
    assert (schema["properties"][0]["name"], schema["properties"][0]["tokenization"]) == ("text", "word")
    assert schema["invertedIndexConfig"] == {"bm25": {"b": 0.5, "k1": 1.5}, "stopwords": {"preset": "none"}}
    vector = schema["vectorConfig"]["default"]
    assert vector["vectorizer"] == {"none": {}}  # bring your own vectors
    assert (vector["vectorIndexType"], vector["vectorIndexConfig"]["distance"]) == ("flat", "cosine")  # exact search
    stored = fake_weaviate.collections[backend.name].objects
    assert sorted(chunk_position(key) for key in stored) == list(range(len(TEXTS)))
    for key, (text, vector) in stored.items():
        assert text == TEXTS[chunk_position(key)]
        assert np.allclose(vector, VECTORS[chunk_position(key)], atol=1e-6)


def test_ingestion_is_idempotent_and_completes_a_partial_one(fake_weaviate):
    connect(fake_weaviate, collection_prefix="TunerAgain").add(TEXTS, VECTORS)
    start = len(fake_weaviate.requests)
    backend = connect(fake_weaviate, collection_prefix="TunerAgain")
    backend.add(TEXTS, VECTORS)
    assert "batch" not in requests_since(fake_weaviate, start)  # found full: nothing written again
    stored = fake_weaviate.collections[backend.name].objects
    for key in list(stored)[:2]:  # an ingestion killed part way
        del stored[key]
    connect(fake_weaviate, collection_prefix="TunerAgain").add(TEXTS, VECTORS)
    assert len(stored) == len(TEXTS)  # the same UUIDs written again: complete, no duplicates


def test_queries_ask_what_tuner_means_and_map_back_to_chunks(fake_weaviate):
    backend = connect(fake_weaviate, collection_prefix="TunerQueries")
    backend.add(TEXTS, VECTORS)
    start = len(fake_weaviate.requests)
    found = backend.bm25("smokehouses herring", 7)
    near = backend.dense(VECTORS[3], 2)
    fused = backend.hybrid("ferry to Halvard", VECTORS[3], 0.25, "ranked", 3)
    bm25, dense, hybrid_search = [r for kind, r in fake_weaviate.requests[start:] if kind == "search"]
    assert (bm25.collection, bm25.limit, bm25.bm25_search.query, list(bm25.bm25_search.properties)) == (
        backend.name, 7, "smokehouses herring", ["text"])
    assert dense.limit == 2 and dense.metadata.distance and not list(dense.properties.non_ref_properties)
    assert (hybrid_search.limit, hybrid_search.hybrid_search.query) == (3, "ferry to Halvard")
    assert hybrid_search.hybrid_search.alpha == pytest.approx(0.25)
    assert hybrid_search.hybrid_search.fusion_type == 1  # FUSION_TYPE_RANKED
    assert found.ids.tolist() == [1] and found.ids.dtype == np.int64
    assert near.ids.tolist()[0] == 3 and near.scores[0] == pytest.approx(1.0, abs=1e-5)  # 1 - cosine distance
    assert fused.ids.tolist()[0] == 3 and len(fused) == 3


def test_a_backend_without_a_server_or_with_a_stemmer_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("WEAVIATE_URL", raising=False)
    with pytest.raises(ConfigError, match="backend.weaviate.url or WEAVIATE_URL"):
        WeaviateBackend(WeaviateConfig())
    with pytest.raises(ConfigError, match="Weaviate does not stem"):
        WeaviateBackend(WeaviateConfig(url="http://localhost:8080"), Bm25Config(stemmer="english"))
    port, grpc_port = free_port(), free_port()  # nothing listens there
    with pytest.raises(ConfigError, match=rf"Weaviate at http://127.0.0.1:{port}: cannot connect") as error:
        WeaviateBackend(WeaviateConfig(url=f"http://127.0.0.1:{port}", grpc_port=grpc_port))
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="cannot connect.*must be different"):  # refused by the client itself
        WeaviateBackend(WeaviateConfig(url=f"http://127.0.0.1:{port}", grpc_port=port))


def test_connection_comes_from_the_url_and_the_key_from_the_environment_only(monkeypatch):
    monkeypatch.setenv("WEAVIATE_URL", "https://cluster.example.net")
    monkeypatch.setenv("MY_WEAVIATE_KEY", "s3cret")
    settings = WeaviateConfig(grpc_port=443, api_key_env="MY_WEAVIATE_KEY")
    arguments = connection_arguments(settings)
    assert {k: v for k, v in arguments.items() if k != "auth_credentials"} == {
        "http_host": "cluster.example.net", "http_port": 443, "http_secure": True,
        "grpc_host": "cluster.example.net", "grpc_port": 443, "grpc_secure": True}
    assert arguments["auth_credentials"].api_key == "s3cret"
    assert "s3cret" not in settings.model_dump_json()  # a config (and a study's copy of it) never holds the key
    monkeypatch.delenv("MY_WEAVIATE_KEY")
    assert "auth_credentials" not in connection_arguments(WeaviateConfig(url="localhost:8080"))
    with pytest.raises(ConfigError, match="expected http"):
        connection_arguments(WeaviateConfig(url="ftp://x"))
    with pytest.raises(ConfigError, match="Weaviate URL 'http://127.0.0.1:abc/': not a URL \\(Port could not be cast"):
        connection_arguments(WeaviateConfig(url="http://127.0.0.1:abc/"))  # was a ValueError: a defect's exit 70


def test_check_fusion_agrees_with_weaviate_on_real_embeddings(fake_weaviate, real_embedder):
    from tuner.data import load_dataset

    demo = load_dataset(None)
    texts = [d.text for d in demo.documents]
    backend = connect(fake_weaviate, collection_prefix="TunerCheck")
    backend.add(texts, real_embedder.encode(texts))
    questions = [q.text for q in demo.questions[:6]]
    checks = check_fusion(backend, real_embedder.encode(questions), questions, (0.0, 0.5, 1.0),
                          ("relative_score", "ranked"), limit=10)
    assert len(checks) == 6 * 3 * 2
    assert all(c.same_order for c in checks)
    assert max(c.score_gap for c in checks) < 1e-5
    assert all(len(c.weaviate) == len(c.tuner) > 0 for c in checks) and any(len(c.tuner) == 10 for c in checks)


def _weaviate_project(tmp_path, server) -> str:
    config = tmp_path / "weaviate.yaml"
    config.write_text(f"backend:\n  type: weaviate\n  weaviate:\n    url: {server.url}\n"
                      f"    grpc_port: {server.grpc_port}\n    collection_prefix: TunerCli\n"
                      f"cache_dir: {tmp_path / 'cache'}\n")
    return str(config)


def test_index_check_hybrid_runs_the_demo_through_weaviate(fake_weaviate, tmp_path):
    from tests.helpers import tuner

    result = tuner("index", "-c", _weaviate_project(tmp_path, fake_weaviate), "--check-hybrid", "--questions", "4",
                   cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Weaviate and tuner agree on all 40 hybrid queries" in result.stdout
    assert any(name.startswith("TunerCli_") and len(c.objects) == 35 for name, c in fake_weaviate.collections.items())


def test_index_check_hybrid_fails_when_weaviate_orders_otherwise(fake_weaviate, tmp_path, monkeypatch):
    from tests.fake_weaviate import Collection
    from tests.helpers import tuner

    original = Collection.hybrid
    monkeypatch.setattr(Collection, "hybrid", lambda self, *args: original(self, *args)[::-1])
    result = tuner("index", "-c", _weaviate_project(tmp_path, fake_weaviate), "--check-hybrid", "--questions", "2",
                   cwd=tmp_path)
    assert result.returncode == 2  # a data error: the deployment would not rank as the study measured
    assert result.stderr.startswith("error: ") and "hybrid queries ordered differently" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_check_hybrid_needs_the_weaviate_backend(tmp_path):
    from tests.helpers import tuner

    result = tuner("index", "--check-hybrid", cwd=tmp_path)
    assert result.returncode != 0 and "set backend.type: weaviate" in result.stderr


def test_the_exported_snippet_runs_against_weaviate(fake_weaviate, monkeypatch, capsys):
    """`tuner export --to weaviate` prints a snippet a user pastes: run it, with the real client, against the
    in-process Weaviate holding chunks stored as tuner stores them (only the address and the embedder swapped)."""
    import sys
    import types

    from tuner.config import PipelineConfig, ProjectConfig
    from tuner.export import weaviate_export

    backend = connect(fake_weaviate, collection_prefix="Snippet")
    backend.add(TEXTS, VECTORS)
    exported = weaviate_export(PipelineConfig(top_k=3, alpha=0.4, fusion="ranked", autocut=None), ProjectConfig(),
                               backend.name)
    address = f"weaviate.connect_to_local(port={fake_weaviate.http_port}, grpc_port={fake_weaviate.grpc_port})"
    code = exported.snippet.replace("weaviate.connect_to_local()", address)
    assert code != exported.snippet

    class Embedder:  # sentence-transformers' interface, with the vectors the chunks were stored with
        def __init__(self, name):
            assert name == "all-MiniLM-L6-v2"

        def encode(self, text, normalize_embeddings=False):
            return HashingEmbedder().encode([text])[0]

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=Embedder))
    exec(compile(code.replace('"your question"', repr(TEXTS[0])), "snippet.py", "exec"), {})
    printed = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(printed) == 3 and TEXTS[0] in printed[0]  # limit 3, the question's own chunk first
