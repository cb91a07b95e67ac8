"""PPI against a constructed population whose true mean is known: coverage and width over seeded simulations."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.analysis.ppi import (
    DIFFERENCE,
    MIN_LABELLED,
    VERDICT,
    correct,
    correct_difference,
    labels_only,
    power_tuning,
    ppi_difference,
    ppi_mean,
    pseudo_labels,
)

SIMULATIONS = 1000


def population(rng, size: int, bias: float, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Human verdicts (supported 1 / not 0, 70 % supported) and a judge that tracks them with a bias and noise."""
    truth = (rng.random(size) < 0.7).astype(float)
    judge = np.clip(truth * 0.8 + 0.1 + bias + rng.normal(0, noise, size), 0, 1)
    return truth, judge


def test_the_corrected_mean_covers_the_truth_and_is_narrower_than_labels_alone():
    covered, widths, classical = 0, [], []
    for seed in range(SIMULATIONS):
        rng = np.random.default_rng(seed)
        truth, judge = population(rng, 1000, bias=-0.15, noise=0.1)  # a judge that under-scores
        labelled = rng.choice(1000, 60, replace=False)
        unlabelled = np.setdiff1d(np.arange(1000), labelled)
        corrected = ppi_mean(judge[unlabelled].tolist(), judge[labelled].tolist(), truth[labelled].tolist())
        covered += corrected.ci[0] <= 0.7 <= corrected.ci[1]
        widths.append(corrected.width)
        classical.append(labels_only(truth[labelled].tolist()).width)
    assert covered / SIMULATIONS >= 0.93
    assert np.mean(widths) < np.mean(classical)  # the informative judge narrows the interval
    # the judge's own mean is biased: its interval would miss the truth
    rng = np.random.default_rng(0)
    truth, judge = population(rng, 1000, bias=-0.15, noise=0.1)
    assert abs(judge.mean() - 0.7) > 0.1


def test_the_paired_difference_covers_the_true_gain():
    covered = 0
    for seed in range(SIMULATIONS):
        rng = np.random.default_rng(10_000 + seed)
        truth_a = (rng.random(500) < 0.75).astype(float)
        truth_b = (rng.random(500) < 0.65).astype(float)  # true difference 0.10
        judge_a = np.clip(truth_a * 0.7 + 0.2 + rng.normal(0, 0.1, 500), 0, 1)
        judge_b = np.clip(truth_b * 0.7 + 0.25 + rng.normal(0, 0.1, 500), 0, 1)  # biased towards b
        labelled = rng.choice(500, 80, replace=False)
        rest = np.setdiff1d(np.arange(500), labelled)
        corrected = ppi_difference(judge_a[rest].tolist(), judge_b[rest].tolist(), judge_a[labelled].tolist(),
                                   judge_b[labelled].tolist(), truth_a[labelled].tolist(), truth_b[labelled].tolist())
        covered += corrected.ci[0] <= 0.10 <= corrected.ci[1]
    assert covered / SIMULATIONS >= 0.93


@pytest.mark.parametrize("labels", [5, 8, 12])
@pytest.mark.parametrize("noise", [0.1, 0.3, None])  # a good judge, a weak one, one that is noise alone
def test_a_handful_of_labels_still_covers_and_is_never_wider_than_the_labels_alone(labels, noise):
    covered, widths, classical = 0, [], []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        truth, judge = population(rng, 200, bias=-0.1, noise=noise or 0.0)
        if noise is None:
            judge = rng.random(200)
        labelled = rng.choice(200, labels, replace=False)
        rest = np.setdiff1d(np.arange(200), labelled)
        corrected = ppi_mean(judge[rest].tolist(), judge[labelled].tolist(), truth[labelled].tolist())
        covered += corrected.ci[0] <= truth.mean() <= corrected.ci[1]
        widths.append(corrected.width)
        classical.append(labels_only(truth[labelled].tolist()).width)
    assert covered / 300 >= 0.93
    assert np.mean(widths) <= np.mean(classical)


def test_the_judge_weighs_what_it_tells_of_the_labels():
    labels = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert power_tuning([0.0, 1.0] * 25, labels, labels) > 0.85  # a judge that says what the labels say: λ near 1
    assert power_tuning([0.5] * 50, [0.5] * 6, labels) == 0.0  # a judge that says the same of everything
    assert power_tuning([0.2, 0.9] * 25, [1 - y for y in labels], labels) == 0.0  # one that disagrees: clipped
    # λ = 0 is the labels alone, pseudo-labels included
    assert ppi_mean([0.5] * 50, [0.5] * 6, labels).ci == pytest.approx(labels_only(labels).ci)
    assert pseudo_labels(VERDICT) == [0.0, 1.0, 0.5, 0.5] and pseudo_labels(DIFFERENCE) == [-1.0, 1.0, 0.0, 0.0]


def test_correct_uses_the_unlabelled_judgements_needs_enough_labels_and_pairs_differences():
    judge = {f"q{i}": 0.2 + 0.6 * (i % 2) for i in range(20)}  # tracks the labels below exactly
    few = {f"q{i}": 1.0 for i in range(MIN_LABELLED - 1)}
    assert correct(judge, few) is None  # too few to tell the rectifier's spread
    human = {f"q{i}": float(i % 2) for i in range(10)}
    fixed = correct(judge, human)
    assert fixed.labelled == 10 and fixed.judged == 20
    unlabelled = [judge[f"q{i}"] for i in range(10, 20)]
    assert fixed == ppi_mean(unlabelled, [judge[q] for q in human], list(human.values()))
    everything = correct({q: judge[q] for q in human}, human)
    assert everything == labels_only(list(human.values()))  # every question labelled: the labels alone
    assert correct({**judge, "q0": None}, human).labelled == 9  # an unscored answer cannot be rectified
    better = {q: v + 0.1 for q, v in judge.items()}
    gained = correct_difference(judge, better, {q: 0.0 for q in human}, {q: 1.0 for q in human})
    differences = [0.1] * 10  # the judge's per-question gain never varies: λ = 0, the labelled differences alone
    assert gained == ppi_mean(differences, differences, [1.0] * 10, span=DIFFERENCE)
    assert gained.estimate == pytest.approx((10 + sum(pseudo_labels(DIFFERENCE))) / 14)
