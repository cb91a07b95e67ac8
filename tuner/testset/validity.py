"""Does a synthetic test set measure anything? It does if it ranks pipeline configurations the way real questions do:
Kendall's τ between the configurations' mean scores on the human questions and on the synthetic ones, with a
bootstrap interval over the questions of both sets (each resampled on its own, as they are independent samples)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tuner.data import Document, Question

#: words a lexical overlap counts: four letters or more (no "the", "was", "who"), and not a question's frame
_WORD = re.compile(r"[a-z0-9]{4,}")
_FRAME = frozenset("what when where which whom whose does were have been with from that this there their into "
                   "about many much name".split())


#: the mean lexical overlap a generated set is held to when no real question says what the users' is: people's
#: questions in four public QA sets share 0.61–0.89 of their content words with the documents that answer them
#: (docs/performance.md; 0.78 on average), and a generator left alone writes 0.75–0.89 from their corpora
DEFAULT_OVERLAP = 0.75
#: a question on which the configurations' scores span at least this much separates them (an nDCG@10 of 1 vs 0.9 is
#: the gold document one place lower)
DISAGREE = 0.1


@dataclass(frozen=True)
class Agreement:
    tau: float
    ci: tuple[float, float]
    #: index of the best configuration by the human questions' mean, and by the synthetic ones'
    best_human: int
    best_synthetic: int
    #: the human questions' mean score of each of the two bests: what choosing by the synthetic set costs
    human_of_best_human: float
    human_of_best_synthetic: float
    #: the configurations the synthetic set cannot tell from its best: the 95 % interval of their paired difference
    #: from it (the same resampled questions) reaches 0. Choosing among them is the questions' noise, not a finding
    tied_synthetic: tuple[int, ...] = ()


def rank_agreement(human: np.ndarray, synthetic: np.ndarray, resamples: int = 1000, seed: int = 0) -> Agreement:
    """`human`, `synthetic`: per-question scores, shape (questions, configurations), the same configurations in the
    same column order."""
    from scipy.stats import kendalltau

    if human.shape[1] != synthetic.shape[1] or human.shape[1] < 3:
        raise ValueError("both sets must score the same configurations, at least 3 of them")
    tau = float(kendalltau(human.mean(axis=0), synthetic.mean(axis=0)).statistic)
    rng = np.random.default_rng(seed)
    taus, drawn = [], []
    for _ in range(resamples):
        h = human[rng.integers(0, len(human), len(human))].mean(axis=0)
        s = synthetic[rng.integers(0, len(synthetic), len(synthetic))].mean(axis=0)
        drawn.append(s)
        value = kendalltau(h, s).statistic
        if not np.isnan(value):  # every configuration tied on one side: no order to compare
            taus.append(value)
    low, high = (float(np.percentile(taus, 2.5)), float(np.percentile(taus, 97.5))) if taus else (np.nan, np.nan)
    means_h, means_s = human.mean(axis=0), synthetic.mean(axis=0)
    best_h, best_s = int(np.argmax(means_h)), int(np.argmax(means_s))
    drawn = np.asarray(drawn)
    ahead = np.percentile(drawn[:, [best_s]] - drawn, 2.5, axis=0)  # the best's lead over each, its low end
    tied = tuple(int(j) for j in np.argsort(-means_s) if j != best_s and ahead[j] <= 0)
    return Agreement(tau, (low, high), best_h, best_s, float(means_h[best_h]), float(means_h[best_s]), tied)


@dataclass(frozen=True)
class Halves:
    """The yardstick for τ: how well a set of people's questions agrees with another set of people's questions of the
    same size. Each split parts the human questions in two random halves; `human` is τ between the halves' rankings,
    `synthetic` τ between a same-sized random draw of the synthetic questions and the second half. Medians over the
    splits, and the 2.5th and 97.5th percentiles of `human`."""
    human: float
    human_range: tuple[float, float]
    synthetic: float
    half: int


def split_halves(human: np.ndarray, synthetic: np.ndarray, splits: int = 1000, seed: int = 0) -> Halves:
    """τ ≥ 0.6 against the human ranking means little if two halves of the human questions themselves agree only
    at 0.4: then no test set of that size could reach it. Same array shapes as `rank_agreement`."""
    from scipy.stats import kendalltau

    half = min(len(human) // 2, len(synthetic))
    if half < 2:
        raise ValueError("split halves need at least 4 human and 2 synthetic questions")
    rng = np.random.default_rng(seed)
    people, ours = [], []
    for _ in range(splits):
        order = rng.permutation(len(human))
        first, second = human[order[:half]].mean(axis=0), human[order[half:2 * half]].mean(axis=0)
        drawn = synthetic[rng.choice(len(synthetic), half, replace=False)].mean(axis=0)
        people.append(kendalltau(first, second).statistic)
        ours.append(kendalltau(drawn, second).statistic)
    people, ours = np.asarray(people, dtype=float), np.asarray(ours, dtype=float)
    low, high = np.nanpercentile(people, [2.5, 97.5])
    return Halves(float(np.nanmedian(people)), (float(low), float(high)), float(np.nanmedian(ours)), half)


def lexical_overlap(question: str, sources: Sequence[str]) -> float:
    """Share of the question's words (4+ letters) that its source passages contain: how far a question can be
    found by matching its words. Synthetic questions copied from their chunk run high; people's run lower."""
    words = content_words(question)
    if not words:
        return 0.0
    return len(words & set(_WORD.findall(" ".join(sources).lower()))) / len(words)


def content_words(text: str) -> set[str]:
    """The words a lexical overlap counts: 4+ letters, lower-cased, a question's frame left out."""
    return set(_WORD.findall(text.lower())) - _FRAME


def overlaps(questions: Sequence[Question], documents: Sequence[Document]) -> list[float]:
    """Each question's lexical overlap with the documents that answer it (questions without gold ids left out)."""
    texts = {d.id: d.text for d in documents}
    return [lexical_overlap(q.text, [texts[d] for d in sorted(q.relevant_ids) if d in texts])
            for q in questions if q.relevant_ids & texts.keys()]


def overlap_target(questions: Sequence[Question], documents: Sequence[Document]) -> tuple[float, str]:
    """The mean overlap a generated set may reach, and where it comes from: the real questions' mean (any with gold
    ids), else DEFAULT_OVERLAP."""
    real = overlaps(questions, documents)
    if real:
        return round(float(np.mean(real)), 2), f"the mean of {len(real)} real question(s)"
    return DEFAULT_OVERLAP, "the default (no real questions given)"


def discriminating(scores: np.ndarray) -> np.ndarray:
    """Per question (rows of `scores`, one column per configuration): do the configurations disagree on it by
    DISAGREE or more? A question every configuration scores alike carries no ranking signal."""
    return (np.nanmax(scores, axis=1) - np.nanmin(scores, axis=1)) >= DISAGREE - 1e-9
