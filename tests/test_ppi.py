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


def test_the_planned_estimator_is_unbiased_and_its_sequence_covers_the_truth_at_every_draw():
    """Labels asked where the judge is unsure (a labelling plan's draws), read at every draw: the estimate is
    unbiased at a fixed count, and the confidence sequence misses the truth in at most ~5 % of sessions at any draw
    — a stopping rule that looks after every label stays valid."""
    from tuner.analysis.labelling import chances
    from tuner.analysis.ppi import Plan, planned_mean

    rng = np.random.default_rng(7)
    truth, judge = population(rng, 80, bias=-0.2, noise=0.3)  # a weak, strict judge
    ids = [f"q{i}" for i in range(80)]
    judged, human = dict(zip(ids, judge.tolist())), dict(zip(ids, truth.tolist()))
    odds = chances({q: (judged[q],) for q in ids}, 0.5)
    assert max(odds.values()) > 2 * min(odds.values())  # unsure questions are drawn more often
    estimates, missed = [], 0
    for seed in range(400):
        draws = tuple(np.random.default_rng(seed).choice(ids, 60, p=[odds[q] for q in ids]).tolist())
        at = [planned_mean(judged, human, Plan(odds, draws[:m], 60)) for m in range(8, 61)]
        estimates.append(at[-1].estimate)
        missed += any(not c.ci[0] <= truth.mean() <= c.ci[1] for c in at if c is not None)
    assert abs(np.mean(estimates) - truth.mean()) < 0.01
    assert abs(judge.mean() - truth.mean()) > 0.05  # the judge alone is off
    assert missed / 400 <= 0.06


def test_a_plan_reads_its_labelled_run_only_and_says_how_many_draws_it_read():
    from tuner.analysis.ppi import Plan, planned_mean

    ids = [f"q{i}" for i in range(10)]
    judged = dict.fromkeys(ids, 0.6)
    odds = dict.fromkeys(ids, 0.1)
    draws = ("q0", "q1", "q1", "q2", "q3", "q4", "q5", "q6", "q0", "q7")
    human = {q: 1.0 for q in ids if q != "q6"}
    corrected = planned_mean(judged, human, Plan(odds, draws, 10))
    assert corrected.draws == 7 and corrected.labelled == 6  # q6 has no label: its draw and all after it wait
    assert corrected.estimate == pytest.approx(0.6 + 0.4)  # every term (1 − 0.6) / (10 × 0.1)
    assert planned_mean(judged, {q: 1.0 for q in ids[:4]}, Plan(odds, draws, 10)) is None  # < MIN_LABELLED
    # a plan over more questions than this configuration answered: a draw outside them reads as zero, and goes on
    wider = Plan({**dict.fromkeys(ids, 0.09), "x": 0.1}, ("x", "q0", "q1", "q2", "q3", "q4", "x", "q5", "q6"), 10)
    corrected = planned_mean(judged, human, wider)
    assert corrected.draws == 8 and corrected.labelled == 6
    assert corrected.estimate == pytest.approx(0.6 + 6 * (0.4 / (10 * 0.09)) / 8)
    whole = planned_mean(judged, dict.fromkeys(ids, 1.0), Plan(odds, (*draws, "q8", "q9"), 10))
    assert whole.ci == labels_only([1.0] * 10).ci  # every question labelled: the labels' own figure


def test_chances_favour_answers_near_the_cut_and_leave_alike_answers_the_floor():
    from tuner.analysis.labelling import EVEN, chances

    odds = chances({"near": (0.55, 0.4), "far": (0.99, 0.01), "alike": ()}, 0.5)
    assert sum(odds.values()) == pytest.approx(1.0)
    assert odds["near"] > odds["far"] > odds["alike"] == pytest.approx(EVEN / 3)
    assert chances({"a": (), "b": ()}, 0.5) == {"a": 0.5, "b": 0.5}  # nothing to tell apart: even


@pytest.mark.parametrize("ci, labelled, drawn, said", [
    ((0.05, 0.30), 12, 20, "decided: you can stop"),
    ((-0.40, -0.02), 12, 20, "decided: you can stop"),
    ((-0.10, 0.50), 6, 20, "undecided: go on"),
    ((-0.04, 0.05), 12, 20, "undecided, and the labels left are unlikely to decide it: you can stop"),
    ((-0.05, 0.45), 12, 20, "undecided: go on"),  # likely to decide if it keeps reading +0.20
    ((-0.04, 0.05), 6, 20, "undecided: go on"),  # too early to give up
    ((-0.30, 0.35), 12, 60, "undecided after the labels planned: more (--n) may decide it, or the two are alike"),
])
def test_the_session_says_when_to_stop(ci, labelled, drawn, said):
    from tuner.analysis.labelling import decision
    from tuner.analysis.ppi import Corrected

    assert decision(Corrected(sum(ci) / 2, ci, labelled, 100, drawn), drawn, 60) == said
    assert decision(None, 0, 60).startswith("go on: too few labels")
