"""The contract every reranker passes: calibrated, deterministic, order-preserving output, one per chunk."""

import numpy as np
import pytest

from tuner.config import RerankerConfig
from tuner.errors import ConfigError, TunerError
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import Chunk
from tuner.pipeline.rerankers import CrossEncoderReranker, make_reranker

QUESTION = "Who designed the Greywater Bridge?"
TEXTS = [
    "Puffins nest on the cliffs of Skerrin from May to August.",
    "The Greywater Bridge was designed by the engineer Ilsa Marrow and opened in 1911.",
    "The ferry to Halvard takes three hours and twenty minutes.",
]


def candidates(scores=(0.2, 0.9, 0.5)):
    return [Candidate(i, Chunk(f"d{i}#0", f"d{i}", t), s) for i, (t, s) in enumerate(zip(TEXTS, scores))]


@pytest.fixture(params=["none", "embedding", "cross-encoder", "llm"])
def reranker(request, fake_embedder):
    settings = RerankerConfig()
    if request.param == "llm":  # the real 0.5B model, reading P(yes) off its next-token distribution
        return make_reranker("llm", settings, fake_embedder, request.getfixturevalue("small_llm"), llm_top_n=5)
    if request.param == "cross-encoder":
        settings = RerankerConfig(cross_encoder_model=str(request.getfixturevalue("tiny_cross_encoder")))
    embedder = request.getfixturevalue("real_embedder") if request.param == "embedding" else fake_embedder
    return make_reranker(request.param, settings, embedder)


def test_one_confidence_in_unit_interval_per_candidate(reranker):
    # the scorer itself must be calibrated: `confidences` clips, so checking its output could never fail
    raw = np.asarray(reranker._score(QUESTION, candidates()))
    assert raw.shape == (3,)
    assert ((raw >= 0) & (raw <= 1)).all(), raw
    np.testing.assert_allclose(reranker.confidences(QUESTION, candidates()), raw, atol=1e-6)


def test_deterministic_and_independent_of_order(reranker):
    first = reranker.confidences(QUESTION, candidates())
    reranker._memo.clear()  # score again for real, not from the memo the first call filled
    np.testing.assert_allclose(reranker.confidences(QUESTION, candidates()), first, atol=1e-6)
    if reranker.cacheable:  # a pure function of (question, text)
        reranker._memo.clear()
        reversed_scores = reranker.confidences(QUESTION, candidates()[::-1])
        np.testing.assert_allclose(reversed_scores[::-1], first, atol=1e-6)


def test_no_candidates(reranker):
    assert reranker.confidences(QUESTION, []).shape == (0,)


def test_none_keeps_retrieval_order_relative_to_the_best():
    scores = make_reranker("none", RerankerConfig(), None).confidences(QUESTION, candidates((0.2, 0.8, 0.4)))
    np.testing.assert_allclose(scores, [0.25, 1.0, 0.5])


def test_embedding_reranker_is_confident_about_the_answering_chunk_only(real_embedder):
    scores = make_reranker("embedding", RerankerConfig(), real_embedder).confidences(QUESTION, candidates())
    assert scores[1] > 0.5 > max(scores[0], scores[2])


def test_cross_encoder_runs_a_real_model_and_memoises_pairs(tiny_cross_encoder):
    reranker = CrossEncoderReranker(str(tiny_cross_encoder))
    calls = []
    original = reranker._model.predict
    reranker._model.predict = lambda pairs, **kw: calls.append(len(pairs)) or original(pairs, **kw)
    first = reranker.confidences(QUESTION, candidates())
    reranker.confidences(QUESTION, candidates())
    assert calls == [3]  # second call answered from the memo
    assert len(set(np.round(first, 6))) > 1  # a real (random) model tells the texts apart


def test_cross_encoder_configuration_errors(tmp_path):
    with pytest.raises(ConfigError, match="cross_encoder_model"):
        make_reranker("cross-encoder", RerankerConfig(), None)
    with pytest.raises(TunerError, match="could not be loaded offline"):
        CrossEncoderReranker(str(tmp_path / "no-model"))
    with pytest.raises(ConfigError, match="unknown reranker"):
        make_reranker("colbert", RerankerConfig(), None)


def test_llm_reranker_scores_only_the_top_n(scripted_llm):
    reranker = make_reranker("llm", RerankerConfig(), None, scripted_llm, llm_top_n=2)
    scores = reranker.confidences(QUESTION, candidates())
    assert len(scripted_llm.calls) == 2 and scores[2] == 0.0


def test_llm_reranker_ranks_the_answering_chunk_first(small_llm):
    # the 0.5B model orders passages right but is poorly calibrated (~0.3-0.4); 1.5B gives 0.98 vs 0.2-0.3
    scores = make_reranker("llm", RerankerConfig(), None, small_llm).confidences(QUESTION, candidates())
    assert scores.argmax() == 1 and scores[1] > max(scores[0], scores[2]) + 0.05


def test_llm_reranker_needs_a_model():
    with pytest.raises(ConfigError, match="needs a language model"):
        make_reranker("llm", RerankerConfig(), None)
