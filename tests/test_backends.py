"""The contract every retrieval backend passes (the Weaviate backend joins the parametrisation)."""

import os

import numpy as np
import pytest

from tests.fakes import HashingEmbedder
from tests.helpers import TEXTS
from tuner.config import BackendConfig, Bm25Config, WeaviateConfig
from tuner.pipeline.backends import EmbeddedBackend, RetrievalBackend, make_backend

NO_WEAVIATE = "WEAVIATE_URL is not set: the live Weaviate tests need a server, and none can run on this machine"


def weaviate_backend(request, url: str, grpc_port: int) -> RetrievalBackend:
    pytest.importorskip("weaviate", reason="needs the weaviate extra")
    return make_backend(BackendConfig(type="weaviate", weaviate=WeaviateConfig(
        url=url, grpc_port=grpc_port, collection_prefix="TunerContractTest")))


BACKENDS = {
    "embedded": lambda request: EmbeddedBackend(),
    "embedded-stemmed": lambda request: EmbeddedBackend(stemmer="english"),
    # the real client against an in-process server (tests/fake_weaviate.py): schema, ingestion, queries, mapping
    "weaviate-fake": lambda request: weaviate_backend(request, (server := request.getfixturevalue("fake_weaviate")).url,
                                                      server.grpc_port),
    "weaviate-live": lambda request: weaviate_backend(request,
                                                      os.environ.get("WEAVIATE_URL") or pytest.skip(NO_WEAVIATE),
                                                      int(os.environ.get("WEAVIATE_GRPC_PORT", "50051"))),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request) -> tuple[RetrievalBackend, np.ndarray]:
    vectors = HashingEmbedder().encode(TEXTS)
    store = BACKENDS[request.param](request)
    store.add(TEXTS, vectors)
    return store, vectors


def test_stores_every_chunk(backend):
    store, _ = backend
    assert len(store) == len(TEXTS)


def test_bm25_finds_the_chunk_with_the_words_first_and_only_matching_chunks(backend):
    store, _ = backend
    found = store.bm25("smokehouses herring", limit=10)
    assert found.ids[0] == 1
    assert (found.scores > 0).all()
    assert found.scores.tolist() == sorted(found.scores.tolist(), reverse=True)
    assert 2 not in found.ids.tolist()


def test_dense_returns_the_chunk_itself_with_cosine_one(backend):
    store, vectors = backend
    found = store.dense(vectors[3], limit=2)
    assert found.ids.tolist()[0] == 3
    assert found.scores[0] == pytest.approx(1.0, abs=1e-5)
    assert len(found) == 2


def test_limits_and_empty_queries(backend):
    store, vectors = backend
    assert len(store.dense(vectors[0], limit=100)) == len(TEXTS)
    assert len(store.bm25("the of and", limit=10)) == 0  # stopwords only
    assert len(store.bm25("zzzz unknownword", limit=10)) == 0
    assert store.bm25("bridge", limit=10).ids.dtype == np.int64


@pytest.mark.parametrize("name", ["weaviate-fake", "weaviate-live"])
def test_weaviate_hits_equal_the_embedded_backends(name, request):
    """Same chunks, same vectors: Weaviate ranks them as the embedded backend does, so a study's figures hold on
    whichever backend serves them."""
    vectors = HashingEmbedder().encode(TEXTS)
    store, embedded = BACKENDS[name](request), EmbeddedBackend()
    for each in (store, embedded):
        each.add(TEXTS, vectors)
    for query in ("smokehouses herring", "bridge river port", "highest point island", "ferry hours"):
        assert store.bm25(query, 10).ids.tolist() == embedded.bm25(query, 10).ids.tolist()
    for vector in (vectors[0], vectors[2] + vectors[4]):
        unit = vector / np.linalg.norm(vector)
        ours, theirs = store.dense(unit, 5), embedded.dense(unit, 5)
        assert ours.ids.tolist() == theirs.ids.tolist()
        assert ours.scores == pytest.approx(theirs.scores, abs=1e-5)


def test_mismatched_texts_and_vectors_are_refused():
    with pytest.raises(ValueError):
        EmbeddedBackend().add(TEXTS, np.zeros((2, 4), dtype=np.float32))


def test_stemming_matches_other_forms_of_a_word_only_when_asked():
    vectors = HashingEmbedder().encode(TEXTS)
    plain, stemmed = make_backend(BackendConfig()), make_backend(BackendConfig(bm25=Bm25Config(stemmer="english")))
    for store in (plain, stemmed):
        store.add(TEXTS, vectors)
    assert len(plain.bm25("smokehouse crossing", limit=10)) == 0
    assert sorted(stemmed.bm25("smokehouse crossing", limit=10).ids.tolist()) == [0, 1]


def test_stopwords_can_be_kept():
    vectors = HashingEmbedder().encode(TEXTS)
    store = EmbeddedBackend(stopwords="none")
    store.add(TEXTS, vectors)
    assert len(store.bm25("the of and", limit=10)) > 0
