import math

import pytest

from tuner.evaluation.retrieval_metrics import aggregate, question_metrics
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import Chunk
from tuner.pipeline.selection import autocut, select_autocut, select_dynamic_k


def ranked(*confidences):
    return [Candidate(i, Chunk(f"d{i}#0", f"d{i}", "t"), 1.0, confidence=c) for i, c in enumerate(confidences)]


def test_dynamic_k_keeps_the_best_then_the_confident():
    pool = ranked(0.2, 0.1, 0.05)
    assert len(select_dynamic_k(pool, threshold=0.5, min_docs=1, max_docs=5)) == 1  # best kept even below
    assert len(select_dynamic_k(ranked(0.9, 0.8, 0.6, 0.3), 0.5, 1, 5)) == 3
    assert len(select_dynamic_k(ranked(0.9, 0.8, 0.6, 0.55), 0.5, 1, 2)) == 2  # capped
    assert len(select_dynamic_k(ranked(0.9, 0.1, 0.1, 0.1), 0.5, 3, 5)) == 3  # floored in rank order
    assert select_dynamic_k([], 0.5, 1, 5) == []
    assert len(select_dynamic_k(ranked(0.9, 0.1), 0.5, 3, 5)) == 2  # never more than there is


GROUPS = [0.9, 0.88, 0.87, 0.5, 0.48, 0.47, 0.2]  # three groups of scores, as in Weaviate's autocut docs


def test_autocut_cuts_before_the_nth_jump():
    # normalised minus the line: 0, -.14, -.29, +.07, -.07, -.22, 0 -> maxima at 3 and at the last point
    assert autocut(GROUPS, 1) == 3
    assert autocut(GROUPS, 2) == 6
    assert autocut(GROUPS, 3) == 7  # fewer jumps than asked: everything
    assert autocut([0.5, 0.5, 0.5], 1) == 3 and autocut([0.7], 1) == 1 and autocut([], 1) == 0
    assert autocut([1.0, 0.2], 1) == 2  # two points: no jump to cut at (Weaviate would index before the list)
    assert autocut([0.9, 0.2, 0.19, 0.18], 1) == 1  # one strong result, then the rest


def test_select_autocut_reads_the_first_top_k_confidences():
    pool = ranked(*GROUPS)
    assert [c.confidence for c in select_autocut(pool, top_k=7, jumps=1)] == GROUPS[:3]
    assert len(select_autocut(pool, top_k=5, jumps=1)) == 3
    assert len(select_autocut(pool, top_k=3, jumps=1)) == 1  # 0.9, 0.88, 0.87: normalised, 0.02 is the jump


def test_question_metrics_count_documents_once():
    ranking = ["x", "g1", "g1", "y", "g2"]
    m = question_metrics(ranking, selected=["x", "g1"], gold={"g1", "g2"}, k=2)
    assert m["recall@k"] == 0.5
    assert m["recall@1"] == 0.0 and m["recall@5"] == 1.0
    assert m["precision"] == 0.5
    assert m["mrr"] == 0.5
    # g1's second chunk takes no rank: g2 is the 4th document, not the 5th item
    assert m["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3)))


def test_ranking_metrics_rank_documents_not_chunks():
    # five chunks of g1 ahead of g2: a chunk ranking would put g2 at 6, past recall@5; documents put it at 2
    m = question_metrics(["g1"] * 5 + ["g2"], selected=["g1", "g1", "x"], gold={"g1", "g2"}, k=1)
    assert m["recall@5"] == 1.0 and m["recall@1"] == 0.5 and m["recall@k"] == 0.5
    assert m["ndcg@10"] == pytest.approx(1.0)
    assert m["precision"] == 0.5  # [g1#0, g1#1, x]: documents g1 and x, one of them gold


def test_perfect_and_empty_rankings():
    assert question_metrics(["g"], ["g"], {"g"}, 1)["ndcg@10"] == pytest.approx(1.0)
    zero = question_metrics([], [], {"g"}, 5)
    assert zero["recall@k"] == 0.0 and zero["precision"] == 0.0 and zero["mrr"] == 0.0


def test_aggregate_skips_questions_without_gold_but_counts_their_k():
    summary = aggregate([{"mrr": 1.0}, {}, {"mrr": 0.0}], [1, 3, 5])
    assert summary["mrr"] == 0.5
    assert summary["mean_k"] == 3.0
    assert summary["questions_scored"] == 2
