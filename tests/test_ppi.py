"""PPI against a constructed population whose true mean is known: coverage and width over seeded simulations."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.analysis.ppi import labels_only, ppi_difference, ppi_mean

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


def test_correct_uses_the_unlabelled_judgements_needs_enough_labels_and_pairs_differences():
    from tuner.analysis.ppi import MIN_LABELLED, correct, correct_difference

    judge = {f"q{i}": 0.5 for i in range(20)}
    few = {f"q{i}": 1.0 for i in range(MIN_LABELLED - 1)}
    assert correct(judge, few) is None  # too few to tell the rectifier's spread
    human = {f"q{i}": float(i % 2) for i in range(10)}
    fixed = correct(judge, human)
    assert fixed.labelled == 10 and fixed.judged == 20
    assert fixed.estimate == 0.5 - (0.5 - 0.5)  # the judge's mean minus its mean error on the labelled
    everything = correct({q: judge[q] for q in human}, human)
    assert everything == labels_only(list(human.values()))  # every question labelled: the labels alone
    assert correct({**judge, "q0": None}, human).labelled == 9  # an unscored answer cannot be rectified
    gained = correct_difference(judge, {q: 0.6 for q in judge}, {q: 0.0 for q in human}, {q: 1.0 for q in human})
    assert gained.estimate == pytest.approx(0.1 - (0.1 - 1.0))
