"""Embedder contract (fake and real) and the on-disk cache."""

import numpy as np
import pytest

from tests.fakes import HashingEmbedder
from tuner.errors import TunerError
from tuner.models.embedders import CachedEmbedder, SentenceTransformerEmbedder


@pytest.fixture(params=["hashing", "minilm"])
def embedder(request, tmp_path):
    if request.param == "hashing":
        return HashingEmbedder()
    return request.getfixturevalue("real_embedder")


def test_embedder_contract(embedder):
    vectors = embedder.encode(["Who designed the bridge?", "Ilsa Marrow designed the bridge.", "Puffins nest."])
    assert vectors.shape == (3, embedder.dim) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # related texts are closer
    np.testing.assert_allclose(embedder.encode(["Puffins nest."])[0], vectors[2], atol=1e-5)
    assert embedder.encode([]).shape == (0, embedder.dim)


def test_cache_embeds_each_text_once_and_survives_a_restart(tmp_path):
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    first = cached.encode(["a b", "c d", "a b"])
    assert inner.texts_encoded == 2  # the repeat within one call is embedded once
    again = cached.encode(["c d", "a b"])
    assert inner.texts_encoded == 2
    np.testing.assert_array_equal(again, first[[1, 0]])

    fresh_inner = HashingEmbedder()
    reopened = CachedEmbedder(fresh_inner, tmp_path)
    np.testing.assert_array_equal(reopened.encode(["a b", "c d"]), first[:2])
    assert fresh_inner.calls == 0
    assert not list(tmp_path.rglob("*.tmp.npz"))


def test_cache_is_keyed_by_model_name(tmp_path):
    CachedEmbedder(HashingEmbedder(), tmp_path).encode(["x"])
    other = HashingEmbedder()
    other.name = "another-model"
    CachedEmbedder(other, tmp_path).encode(["x"])
    assert other.texts_encoded == 1


def test_unknown_model_fails_with_one_clear_line():
    pytest.importorskip("sentence_transformers")
    with pytest.raises(TunerError, match="could not be loaded offline"):
        SentenceTransformerEmbedder("no-such-org/no-such-model")
