import random

import numpy as np
import pytest

from tests.weaviate_fusion import weaviate_ranked, weaviate_relative_score
from tuner.config import FusionType
from tuner.pipeline.backends import Hits
from tuner.pipeline.backends._weaviate import chunk_position, chunk_uuid
from tuner.pipeline.fusion import FUSIONS, distribution_scaled, fuse, hybrid, rescale, standardise


def hits(ids, scores):
    return Hits(np.array(ids, dtype=np.int64), np.array(scores, dtype=np.float64))


def as_dict(result: Hits) -> dict[int, float]:
    return dict(zip(result.ids.tolist(), result.scores.tolist()))


def test_relative_score_rescaling_matches_the_worked_example():
    np.testing.assert_allclose(rescale(np.array([1.0, 8, 6, 11])), [0, 0.7, 0.5, 1])


def test_a_single_hit_rescales_to_one():
    np.testing.assert_allclose(rescale(np.array([3.7])), [1.0])


def test_bm25_only_hit_scores_its_weight_at_alpha_quarter():
    bm25 = hits([7, 3], [11.0, 1.0])  # chunk 7 rescales to 1.0
    dense = hits([1, 2], [0.9, 0.2])  # chunk 7 not found by the vector side: counts 0 there
    fused = as_dict(hybrid(bm25, dense, alpha=0.25, fusion="relative_score", limit=10))
    assert fused[7] == pytest.approx(0.75)  # (1 - 0.25) * 1.0
    assert fused[1] == pytest.approx(0.25)  # 0.25 * 1.0


def test_ranked_fusion_gives_each_rank_zero_hit_half_over_sixty():
    fused = as_dict(hybrid(hits([5, 6], [9.0, 1.0]), hits([8, 5], [0.9, 0.8]), 0.5, "ranked", 10))
    assert fused[8] == pytest.approx(0.5 / 60)
    assert fused[6] == pytest.approx(0.5 / 61)
    assert fused[5] == pytest.approx(0.5 / 60 + 0.5 / 61)
    assert list(hybrid(hits([5, 6], [9.0, 1.0]), hits([8, 5], [0.9, 0.8]), 0.5, "ranked", 10).ids)[0] == 5


def test_ranked_fusion_takes_its_rank_constant():
    fused = as_dict(hybrid(hits([5, 6], [9.0, 1.0]), hits([8, 5], [0.9, 0.8]), 0.5, "ranked", 10, rank_constant=1))
    assert fused[5] == pytest.approx(0.5 / 1 + 0.5 / 2)
    assert fused[6] == pytest.approx(0.5 / 2)


def test_zscore_and_distribution_normalisations_match_worked_examples():
    scores = np.array([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])  # mean 5, deviation 2
    np.testing.assert_allclose(standardise(scores), [-1.5, -0.5, -0.5, -0.5, 0, 0, 1, 2])
    np.testing.assert_allclose(distribution_scaled(scores), (scores + 1) / 12)  # mean - 3 dev = -1, range 12
    outlier = distribution_scaled(np.array([0.0] * 15 + [100.0]))  # 100 lies beyond mean + 3 deviations: clipped
    assert outlier[-1] == 1.0 and outlier[0] == pytest.approx((3 * 24.206 - 6.25) / (6 * 24.206), abs=1e-3)
    assert standardise(np.array([3.0])).tolist() == [0.0] and distribution_scaled(np.array([3.0])).tolist() == [0.5]


def test_zscore_counts_a_missing_hit_as_the_lists_lowest_not_its_mean():
    bm25 = hits([1, 2, 3], [3.0, 2.0, 1.0])  # z: 1.22, 0, -1.22
    dense = hits([4, 1], [0.9, 0.1])  # z: 1, -1; chunks 2 and 3 missing -> count -1
    fused = as_dict(hybrid(bm25, dense, 0.5, "zscore", 10))
    z = 1.5 ** 0.5
    assert fused[1] == pytest.approx(0.5 * z + 0.5 * -1)
    assert fused[2] == pytest.approx(0.5 * 0 + 0.5 * -1)
    assert fused[4] == pytest.approx(0.5 * -z + 0.5 * 1)  # missing from BM25: its lowest, -1.22
    assert fused[3] == pytest.approx(0.5 * -z + 0.5 * -1)


def test_dbsf_counts_a_missing_hit_zero():
    bm25, dense = hits([1, 2], [3.0, 1.0]), hits([3], [0.8])  # bm25 mean 2, dev 1 -> 3 maps to 4/6
    fused = as_dict(hybrid(bm25, dense, 0.5, "dbsf", 10))
    assert fused[1] == pytest.approx(0.5 * 4 / 6)
    assert fused[3] == pytest.approx(0.5 * 0.5)


def test_every_configurable_fusion_is_implemented():
    assert set(FUSIONS) == set(FusionType.__args__)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_alpha_extremes_are_pure_bm25_and_pure_vector(fusion):
    bm25, dense = hits([1, 2, 3], [3.0, 2.0, 1.0]), hits([9, 3, 8], [0.9, 0.5, 0.1])
    assert hybrid(bm25, dense, 0.0, fusion, 10).ids.tolist() == [1, 2, 3]  # vector side not searched
    assert hybrid(bm25, dense, 1.0, fusion, 10).ids.tolist() == [9, 3, 8]


def test_scores_are_summed_and_sorted_and_cut_at_limit():
    bm25, dense = hits([1, 2, 3], [10.0, 5.0, 0.0]), hits([3, 2, 1], [1.0, 0.5, 0.0])
    fused = hybrid(bm25, dense, 0.5, "relative_score", 2)
    assert len(fused) == 2
    assert fused.scores.tolist() == sorted(fused.scores.tolist(), reverse=True)
    np.testing.assert_allclose(as_dict(hybrid(bm25, dense, 0.5, "relative_score", 10))[2], 0.5)


def test_unknown_fusion_is_rejected_and_empty_lists_fuse_to_nothing():
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse([(hits([1], [1.0]), 1.0)], "borda", 5)
    assert len(hybrid(Hits.empty(), Hits.empty(), 0.5, "relative_score", 5)) == 0


def _lists_with_ties(rng: random.Random) -> tuple[Hits, Hits]:
    """BM25 and vector lists over 30 chunks with scores on coarse grids, so fused scores tie often."""
    def side(scale: float) -> Hits:
        chosen = rng.sample(range(30), rng.randint(0, 20))
        scores = sorted((rng.randint(1, 4) * scale for _ in chosen), reverse=True)
        return Hits(np.array(chosen, dtype=np.int64), np.array(scores, dtype=np.float64))
    return side(1.5), side(0.25)


@pytest.mark.parametrize("fusion", ["relative_score", "ranked"])
def test_tuners_fusion_orders_as_weaviates_code_does_ties_included(fusion):
    """Against a transcription of Weaviate's Go (float32 sums; ties by the raw score in the last list, then UUID)
    on 300 random pairs of lists built to tie: same chunks, same order, same scores."""
    fingerprint = "ab" * 32
    weaviate = weaviate_ranked if fusion == "ranked" else weaviate_relative_score
    rng, ties = random.Random(7), 0
    for _ in range(300):
        bm25, dense = _lists_with_ties(rng)
        alpha = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])
        sets, weights = [], []
        for hits, weight in ((bm25, 1 - alpha), (dense, alpha)):
            if weight > 0:
                sets.append([(chunk_uuid(fingerprint, int(i)), float(s)) for i, s in zip(hits.ids, hits.scores)])
                weights.append(weight)
        theirs = weaviate(weights, sets)[:10]
        ours = hybrid(bm25, dense, alpha, fusion, 10)
        assert ours.ids.tolist() == [chunk_position(key) for key, _ in theirs]
        assert ours.scores == pytest.approx([score for _, score in theirs], abs=1e-6)
        ties += bool(np.any(np.abs(np.diff(ours.scores)) < 1e-7))
    assert ties > 30  # the lists did tie: the tie-break was exercised
