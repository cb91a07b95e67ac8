"""Which answers a person labels, in which order (`tuner judge label`): the answers the verdict compares, drawn so
that any prefix of the session is a near-uniform sample of them, as the PPI correction needs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.analysis.verdict import contenders
from tuner.errors import ConfigError
from tuner.evaluation.labels import LABELLED_METRIC, fingerprint
from tuner.evaluation.records import QuestionResult

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


#: judge-score strata the sample is spread over (and one for answers the judge left unscored)
STRATA = (0.25, 0.5, 0.75)


def answers_to_label(view: StudyView, n: int, seed: int = 0) -> list[ToLabel]:
    """The answers worth a person's verdict, in the order to show them: those of the trials the verdict compares
    (best, baseline, contenders) on its held-out questions — on the search questions when the study holds none out.
    Questions are drawn at random, spread over the judge's score strata in proportion to their sizes (any prefix is
    a near-uniform sample, as the PPI correction needs), until the questions drawn hold `n` answers; an answer
    several trials gave is shown once."""
    if view.best is None or view.baseline is None:
        raise ConfigError(f"study {view.name} has no single-target best trial and baseline to label answers of yet")
    trials = {t.number: t for t in [view.baseline, *contenders(view)]}.values()
    held_out = view.split.active
    results = {t.number: t.held_out if held_out else t.result for t in trials}
    if held_out and any(r is None for r in results.values()):
        raise ConfigError(f"the held-out answers of study {view.name} are not scored yet: run `tuner best --study "
                          f"{view.name} --verdict` first (labels correct the held-out verdict)")
    by_question: dict[str, dict[str, ToLabel]] = {}
    for number, result in results.items():
        for q in result.questions:
            answers = by_question.setdefault(q.id, {})
            key = fingerprint(q)
            known = answers.get(key)
            answers[key] = ToLabel(q, (*known.trials, number) if known else (number,), held_out)
    strata: dict[int, list[str]] = {}
    for question, answers in by_question.items():
        scores = [s for a in answers.values() if (s := a.result.value(LABELLED_METRIC)) is not None]
        stratum = -1 if not scores else sum(sum(scores) / len(scores) >= edge for edge in STRATA)
        strata.setdefault(stratum, []).append(question)
    rng = random.Random(seed)
    for questions in strata.values():
        questions.sort()
        rng.shuffle(questions)
    sizes, taken, order = {s: len(q) for s, q in strata.items()}, dict.fromkeys(strata, 0), []
    while len(order) < len(by_question):  # the stratum furthest behind its share of the questions goes next
        stratum = max((s for s in strata if strata[s]),
                      key=lambda s: sizes[s] * (len(order) + 1) / len(by_question) - taken[s])
        order.append(strata[stratum].pop())
        taken[stratum] += 1
    chosen: list[ToLabel] = []
    for question in order:
        if len(chosen) >= n:
            break
        chosen.extend(by_question[question].values())
    return chosen
