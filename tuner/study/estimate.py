"""What a study will cost, told before it starts: the baseline on two search questions, scaled to the study.

Figures are as on a cold cache (a call served from the cache counts at what it cost when it was paid), so running
the estimate twice gives the same answer; the study itself pays less wherever trials repeat calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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

#: search questions the baseline answers for the estimate
SAMPLED = 2


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

    @property
    def questions(self) -> int:
        """Question evaluations of the whole study: every trial on the search questions, the verdict's two
        configurations on the held-out ones."""
        return self.trials * self.search + 2 * self.held_out

    @property
    def calls(self) -> float:
        return self.calls_per_question * self.questions

    @property
    def tokens(self) -> float:
        return self.tokens_per_question * self.questions

    @property
    def seconds(self) -> float:
        return self.seconds_per_question * self.questions


def estimate_study(project: ProjectConfig, settings: StudySettings, trials: int, holdout: float | None,
                   split: Split | None = None, dataset: Path | None = None, limit: int | None = None,
                   models: Models | None = None, embedder: Embedder | None = None,
                   on_progress: IndexProgress | None = None) -> Estimate:
    """The baseline (the project's pipeline) on the first search questions; `split`: a resumed study's own
    (`models`, `embedder`: tests pass fakes). `on_progress(step, done, total)` hears of the index build (minutes
    on a new corpus) and then of the sampled questions."""
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
    sampled = search[:SAMPLED]
    step = f"measuring the baseline on {len(sampled)} search question(s)"
    def shown(index: int, _: str, stage: str) -> None:
        on_progress(step, index + (stage == "done"), len(sampled))

    result = runner.evaluate(runner.answerer.base(project), sampled, metrics=metrics, answer=bool(metrics),
                             on_progress=shown if on_progress else None)
    spent = Cost()  # every stage of every sampled question, the judge's included: the study pays them too
    for question in result.questions:
        for cost in question.cost.values():
            spent.add(cost)
    n = len(result.questions)
    return Estimate(n, spent.cold_calls / n, spent.cold_tokens / n, spent.cold_seconds / n,
                    len(search), len(split.holdout(data.questions)), trials, spent.unmetered_hits,
                    result.cost.llm_calls)
