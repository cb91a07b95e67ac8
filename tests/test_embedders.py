"""Embedder contract (fake and real) and the on-disk cache."""

import numpy as np
import pytest

from tests.fakes import HashingEmbedder
from tuner.errors import TunerError
from tuner.models.embedders import CachedEmbedder, SentenceTransformerEmbedder
from tuner.models.embedders._sentence_transformers import BACKENDS, PRECISIONS, REQUIRES, cache_name


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


def test_each_backend_and_quantisation_caches_its_vectors_apart():
    names = {cache_name("m", b, p) for b in BACKENDS for p in PRECISIONS}
    assert len(names) == len(BACKENDS) * len(PRECISIONS)
    assert cache_name("m", "torch", "fp32") == "m"  # caches written before backends existed stay valid


@pytest.mark.parametrize("backend, precision", [("torch", "bf16"), ("torch", "int8"), ("openvino", "fp32"),
                                               ("openvino", "bf16"), ("openvino", "int8")])
def test_a_backend_gives_torchs_vectors_within_tolerance_and_its_own_cache(backend, precision, tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers")
    if backend == "openvino":
        pytest.importorskip("optimum.intel", reason="the openvino extra is not installed")
    monkeypatch.setenv("TUNER_MODELS_DIR", str(tmp_path / "models"))
    texts = ["Who designed the Sorrel Bridge?", "Ilsa Marrow designed the Sorrel Bridge in 1887.",
             "Puffins nest on the cliffs of Kestrel Bay.", "The ferry to Port Ardent leaves at dawn."]
    reference = SentenceTransformerEmbedder(precision="fp32").encode(texts)
    other = SentenceTransformerEmbedder(backend=backend, precision=precision, batch_size=2)
    vectors = other.encode(texts)
    # int8 moves vectors (cosine ~0.95 for torch's), bf16 a little; what that costs in nDCG@10 is bench/embed.py's
    assert np.min(np.sum(vectors * reference, axis=1)) > {"fp32": 0.9999, "bf16": 0.99, "int8": 0.9}[precision]
    assert np.argmax(vectors[1:] @ vectors[0]) == 0  # the same nearest neighbour
    cached = CachedEmbedder(other, tmp_path / "cache")
    cached.encode(texts[:1])
    torch_cached = CachedEmbedder(SentenceTransformerEmbedder(precision="fp32"), tmp_path / "cache")
    torch_cached.encode(texts[:1])
    assert torch_cached.misses == 1  # the other backend's vector was not taken for torch's
    if backend != "torch":  # exported once, then loaded from the export
        assert len(list((tmp_path / "models" / "embedders").iterdir())) == 1


def test_a_backend_whose_packages_are_missing_is_one_clear_line(monkeypatch):
    pytest.importorskip("sentence_transformers")
    monkeypatch.setitem(REQUIRES, "openvino", ("no_such_package.openvino", "rag-tuner[openvino]"))
    with pytest.raises(TunerError, match=r"backend openvino needs .* pip install 'rag-tuner\[openvino\]'"):
        SentenceTransformerEmbedder(backend="openvino")


def test_auto_precision_is_bf16_only_on_a_cpu_that_computes_it(monkeypatch):
    from tuner.models.embedders import _sentence_transformers as st

    monkeypatch.setattr(st, "native_bf16", lambda: False)  # emulated bf16 is slower than fp32: keep fp32
    assert st.resolve_precision("auto") == "fp32" and st.resolve_precision("int8") == "int8"
    monkeypatch.setattr(st, "native_bf16", lambda: True)
    assert st.resolve_precision("auto") == "bf16" and st.resolve_precision("fp32") == "fp32"
