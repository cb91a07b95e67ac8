"""Which answers a person labels, in which order (`tuner judge label`): the answers the verdict compares, asked
where a label moves the verdict most, and when to stop.

A session follows the study's labelling plan (tuner/analysis/ppi.py's `Plan`): questions drawn with replacement,
each with a chance that grows with how unsure the judge is of its baseline and best answers (scores near the judge's
cut) and is nothing beyond an even floor where the two answers are the same (their difference is known: no label
can move it). The verdict corrects the judge with the plan's estimator and its confidence sequence, so the person
may stop as soon as it decides (`decision`). A study labelled before plans existed keeps the near-uniform order's
PPI correction."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.analysis.corrections import corrections, stored_plan
from tuner.analysis.ppi import Corrected, Plan, sequence_halfwidth
from tuner.analysis.verdict import contenders
from tuner.errors import ConfigError
from tuner.evaluation.judge.cut import cut_of
from tuner.evaluation.labels import LABELLED_METRIC, fingerprint
from tuner.evaluation.records import EvalResult, QuestionResult

if TYPE_CHECKING:
    from tuner.study.results import StudyView


@dataclass(frozen=True)
class ToLabel:
    """One answer to show a person, with every trial that gave it."""

    result: QuestionResult
    trials: tuple[int, ...]
    held_out: bool

    @property
    def key(self) -> str:
        return fingerprint(self.result)


#: the share of each draw spread evenly over every question: every question can be drawn, so the estimate stays
#: unbiased for each configuration's mean too, and a judge confidently wrong cannot starve the questions it misjudges
EVEN = 0.25


def unsure(score: float | None, cut: float) -> float:
    """The variance of a label the judge's `score` predicts, were the score a probability centred on its cut
    (largest at the cut; an answer the judge left unscored counts as the least sure)."""
    if score is None:
        return 0.25
    odds = math.log(max(score, 1e-4) / max(1 - score, 1e-4)) - math.log(cut / (1 - cut))
    chance = 1 / (1 + math.exp(-odds))
    return chance * (1 - chance)


def chances(pairs: dict[str, tuple[float | None, ...]], cut: float) -> dict[str, float]:
    """Each question's chance per draw, from the judge's scores of the two answers compared (an empty tuple when
    they are the same answer): EVEN spread over all, the rest in proportion to the spread of the difference's
    error the scores predict."""
    spread = {q: math.sqrt(sum(unsure(f, cut) for f in scores)) for q, scores in pairs.items()}
    total, size = sum(spread.values()), len(pairs)
    return {q: EVEN / size + (1 - EVEN) * (s / total if total else 1 / size) for q, s in spread.items()}


def draw(chances: dict[str, float], answers: dict[str, int], n: int, seed: int = 0) -> tuple[str, ...]:
    """Questions drawn with replacement until those drawn hold `n` answers (or all are drawn); the same chances
    and seed give the same draws, so a longer plan begins with a shorter one."""
    questions = sorted(chances)
    weights = [chances[q] for q in questions]
    rng, drawn, seen, held = random.Random(seed), [], set(), 0
    while held < n and len(seen) < len(questions):
        question = rng.choices(questions, weights)[0]
        drawn.append(question)
        if question not in seen:
            seen.add(question)
            held += answers[question]
    return tuple(drawn)


def compared_results(view: StudyView) -> dict[int, EvalResult]:
    """{trial number: result} of the trials the verdict compares (baseline first, then best and contenders), on its
    held-out questions, or on the search questions when the study holds none out."""
    if view.best is None or view.baseline is None:
        raise ConfigError(f"study {view.name} has no single-target best trial and baseline to label answers of yet")
    trials = {t.number: t for t in [view.baseline, *contenders(view)]}.values()
    held_out = view.split.active
    results = {t.number: t.held_out if held_out else t.result for t in trials}
    if held_out and any(r is None for r in results.values()):
        raise ConfigError(f"the held-out answers of study {view.name} are not scored yet: run `tuner best --study "
                          f"{view.name} --verdict` first (labels correct the held-out verdict)")
    return results


def labelling_plan(view: StudyView, n: int) -> Plan:
    """The study's plan, drawn until it holds `n` answers: the stored one when it is for these questions (its
    chances kept, so the draws it had stay its first), else a new one from the baseline's and best's scores."""
    results = compared_results(view)
    baseline, best = results[view.baseline.number], results[view.best.number]
    by_id = {q.id: q for q in best.questions}
    distinct: dict[str, set[str]] = {}
    for result in results.values():
        for r in result.questions:
            distinct.setdefault(r.id, set()).add(fingerprint(r))
    answers = {q: len(distinct[q]) for q in by_id}
    stored = stored_plan(view.folder, set(by_id))
    if stored is None:
        cut = cut_of(view.project.evaluation, best)
        base = {q.id: q for q in baseline.questions}
        pairs = {q: () if q in base and fingerprint(base[q]) == fingerprint(by_id[q]) else
                 tuple(r.value(LABELLED_METRIC) for r in (base.get(q), by_id[q]) if r is not None) for q in by_id}
        stored = Plan(chances(pairs, cut), (), 0)
    drawn = draw(dict(stored.chances), answers, n)
    return Plan(stored.chances, max(drawn, stored.draws, key=len), stored.target or len(drawn))


def answers_to_label(view: StudyView, n: int, plan: Plan | None = None) -> list[ToLabel]:
    """The answers worth a person's verdict, in the order to show them: those of the trials the verdict compares
    (best, baseline, contenders), question by question in the order the plan (the study's, when not given) first
    draws them, until the questions hold `n` answers; an answer several trials gave is shown once."""
    results = compared_results(view)
    by_question: dict[str, dict[str, ToLabel]] = {}
    for number, result in results.items():
        for q in result.questions:
            answers = by_question.setdefault(q.id, {})
            key = fingerprint(q)
            known = answers.get(key)
            answers[key] = ToLabel(q, (*known.trials, number) if known else (number,), view.split.active)
    chosen: list[ToLabel] = []
    for question in dict.fromkeys((plan or labelling_plan(view, n)).draws):
        if len(chosen) >= n:
            break
        chosen.extend(by_question[question].values())
    return chosen


def progress(view: StudyView, labels, plan: Plan) -> str:
    """Where a session stands: the best − baseline faithfulness corrected by the labels so far, and whether to go
    on."""
    results = compared_results(view)
    fixed = corrections(results[view.baseline.number], results[view.best.number], labels, plan=plan)
    difference = None if fixed is None else fixed.difference
    said = decision(difference, 0 if difference is None else difference.draws or 0, plan.target)
    if difference is None:
        return said
    return (f"trial {view.best.number} − baseline, corrected by {difference.labelled} labelled questions: "
            f"{difference.estimate:+.2f} [{difference.ci[0]:+.2f}, {difference.ci[1]:+.2f}]: {said}")


#: below this chance of deciding by the plan's end (its trend held), a session is told it may stop
FUTILE = 0.1


def decision(corrected: Corrected | None, drawn: int, target: int) -> str:
    """Whether to go on labelling, from the corrected difference after `drawn` of the plan's draws: stop when its
    interval excludes zero, or when the plan's `target` draws are unlikely to make it (conditional power: were the
    difference what it reads now, the interval at the end would exclude zero with a chance below FUTILE)."""
    if corrected is None:
        return "go on: too few labels to correct the difference yet"
    low, high = corrected.ci
    if low > 0 or high < 0:
        return "decided: you can stop"
    if drawn >= target:
        return "undecided after the labels planned: more (--n) may decide it, or the two are alike"
    spread = corrected.width / 2 / sequence_halfwidth(1, drawn, target)  # one draw's standard deviation
    at_end = spread * sequence_halfwidth(1, target, target)
    moves = spread * math.sqrt(max(1 / drawn - 1 / target, 1e-12))  # how far the estimate may still travel
    chance = sum(0.5 * math.erfc(edge / moves / math.sqrt(2)) for edge in (at_end - corrected.estimate,
                                                                            at_end + corrected.estimate))
    if corrected.labelled >= 10 and chance < FUTILE:
        return "undecided, and the labels left are unlikely to decide it: you can stop"
    return "undecided: go on"
