"""What a study will cost, told before it starts: the baseline on `SAMPLED` search questions spread over the set
(trial 0), then the configuration the study's sampler draws first (trial 1) on the same questions, scaled to the
study.

Trial 1 runs after trial 0 in the same process, as in the study: it resumes the prompt prefixes trial 0 left (a
question's passages), which is what makes later trials cheaper. Figures are as on a cold cache (a call served from
the cache counts at what it cost when it was paid), so running the estimate twice gives the same answer; the study
itself pays less wherever trials repeat calls."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.config import ProjectConfig
from tuner.cost import Cost
from tuner.data import load_dataset
from tuner.data.split import Split
from tuner.errors import ConfigError
from tuner.study.optimize import StudySettings

if TYPE_CHECKING:
    from tuner.models.embedders import Embedder
    from tuner.models.provider import Models
    from tuner.pipeline.index import IndexProgress
    from tuner.study.space import SearchSpace

#: search questions the baseline answers for the estimate, spread over the set: questions differ (on long documents
#: one took 15 s and another 30 s in one trial), so two first ones could miss the study's pace by a third
SAMPLED = 4


@dataclass(frozen=True)
class Estimate:
    sampled: int  # questions the baseline answered
    #: their mean calls, tokens (prompt + completion) and seconds per question, as on a cold cache
    calls_per_question: float
    tokens_per_question: float
    seconds_per_question: float
    search: int  # search questions a trial answers
    held_out: int  # questions the verdict scores the best and the baseline on
    trials: int
    unmetered: int  # cache hits stored before tuner kept a call's seconds: their time is unknown
    paid_now: int  # calls the estimate itself paid (cached: the study will not pay them again)
    #: trial 1, the sampler's first draw: its knobs, and its seconds a question after trial 0 (None: not measured)
    later_params: dict[str, Any] | None = None
    later_seconds_per_question: float | None = None
    later_paid_now: int = 0  # calls trial 1 paid (cached as well)

    @property
    def questions(self) -> int:
        """Question evaluations of the whole study: every trial on the search questions, the verdict's two
        configurations on the held-out ones."""
        return self.trials * self.search + 2 * self.held_out

    @property
    def seconds(self) -> float:
        """The whole study's seconds: trial 0 and the verdict at trial 0's pace, every later trial at trial 1's."""
        later = self.seconds_per_question if self.later_seconds_per_question is None else \
            self.later_seconds_per_question
        return self.seconds_per_question * (min(self.trials, 1) * self.search + 2 * self.held_out) + \
            later * max(self.trials - 1, 0) * self.search

    @property
    def calls(self) -> float:
        return self.calls_per_question * self.questions

    @property
    def tokens(self) -> float:
        return self.tokens_per_question * self.questions


def estimate_study(project: ProjectConfig, settings: StudySettings, trials: int, holdout: float | None,
                   split: Split | None = None, dataset: Path | None = None, limit: int | None = None,
                   models: Models | None = None, embedder: Embedder | None = None,
                   on_progress: IndexProgress | None = None, space: SearchSpace | None = None) -> Estimate:
    """The baseline (the project's pipeline) on the first search questions, then, given the study's `space`, the
    sampler's first draw on them; `split`: a resumed study's own (`models`, `embedder`: tests pass fakes).
    `on_progress(step, done, total)` hears of the index build (minutes on a new corpus) and then of the sampled
    questions."""
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    data = load_dataset(dataset or project.dataset.path, project.dataset.format, limit or project.dataset.limit)
    ids = [q.id for q in data.questions]
    split = split or Split.auto(ids, holdout if holdout is not None else project.dataset.holdout)
    search = split.search(data.questions)
    if not search:
        raise ConfigError("--estimate: the dataset has no search question")
    runner = RagRunner(open_workspace(project, dataset=data, embedder=embedder, on_progress=on_progress),
                       models=models)
    metrics = settings.metrics_needed()
    sampled = search[::max(1, len(search) // SAMPLED)][:SAMPLED]  # a set's order often groups alike questions
    step = f"measuring the baseline on {len(sampled)} search question(s)"
    def shown(index: int, _: str, stage: str) -> None:
        on_progress(step, index + (stage == "done"), len(sampled))

    base = runner.answerer.base(project)
    result = runner.evaluate(base, sampled, metrics=metrics, answer=bool(metrics),
                             on_progress=shown if on_progress else None)
    spent = spent_on(result)
    n = len(result.questions)
    told = Estimate(n, spent.cold_calls / n, spent.cold_tokens / n, spent.cold_seconds / n,
                    len(search), len(split.holdout(data.questions)), trials, spent.unmetered_hits,
                    result.cost.llm_calls)
    if space is None or trials < 2:
        return told
    params = first_draw(space, settings, base)
    step = f"measuring trial 1 on the same {len(sampled)} question(s)"
    later = runner.evaluate(base.with_params(params), sampled, metrics=metrics, answer=bool(metrics),
                            on_progress=shown if on_progress else None)
    return dataclasses.replace(told, later_params=params, later_paid_now=later.cost.llm_calls,
                               later_seconds_per_question=spent_on(later).cold_seconds / len(later.questions))


def spent_on(result) -> Cost:
    """Every stage of every question of an evaluation, the judge's included: the study pays them too."""
    spent = Cost()
    for question in result.questions:
        for cost in question.cost.values():
            spent.add(cost)
    return spent


def first_draw(space: SearchSpace, settings: StudySettings, base) -> dict[str, Any]:
    """The knobs a new study's sampler proposes first after its baseline (trial 1): the same sampler and seed, in a
    study in memory."""
    import optuna

    from tuner.study.optimize import enqueue_baseline, make_sampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=make_sampler(settings, space), directions=["maximize"] * len(settings.targets))
    enqueue_baseline(study, space, base)
    baseline = study.ask()
    space.suggest(baseline)
    study.tell(baseline, [0.0] * len(settings.targets))
    return space.suggest(study.ask())
