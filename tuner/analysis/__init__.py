"""Analysis of a finished (or running) study: pure functions over its typed records, no model needed —
except the opt-in judge-noise measurement, whose results are saved and read back like trial files.

    analysis = analyze(read_study(folder))
    analysis.comparisons[0].sentence()      # best vs baseline on the target, with its CI
    analysis.shares.limiting                # the stage that loses the most target points
    analysis.proposals, analysis.next_space # the next experiments
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.analysis.importance import KnobEffect, knob_effects
from tuner.analysis.noise import JudgeNoise, load_noise
from tuner.analysis.propose import Proposal, next_space, propose
from tuner.analysis.stages import StageShares, attribute
from tuner.analysis.stats import Comparison, compare
from tuner.evaluation.records import RETRIEVAL_METRICS
from tuner.study.optimize import Constraint
from tuner.study.results import StudyView, TrialRecord
from tuner.study.space import SearchSpace

__all__ = ["Analysis", "analyze", "question_values"]


@dataclass(frozen=True)
class Analysis:
    view: StudyView
    #: best vs baseline: the targets first, then guard metrics, then the other metrics the trials scored
    comparisons: tuple[Comparison, ...]
    shares: StageShares | None  # the best trial's lost target points by stage
    effects: tuple[KnobEffect, ...]
    noise: JudgeNoise | None
    proposals: tuple[Proposal, ...]
    next_space: SearchSpace | None  # None: nothing left to search

    @property
    def headline(self) -> Comparison | None:
        return self.comparisons[0] if self.comparisons else None


def question_values(trial: TrialRecord, metric: str) -> dict[str, float | None]:
    return {q.id: q.value(metric) for q in trial.result.questions} if trial.result else {}


def analyze(view: StudyView) -> Analysis:
    best, baseline = view.best, view.baseline
    comparisons: list[Comparison] = []
    shares = None
    noise = load_noise(view.folder.root)
    if best is not None and best.result is not None:
        guards = [Constraint.parse(c).metric for c in view.constraints]
        scored = [m for m, v in best.result.metrics.items() if v is not None]
        if best.result.retrieval.get("questions_scored"):
            scored += [m for m in RETRIEVAL_METRICS if m in best.result.retrieval]
        order = list(dict.fromkeys([*view.targets, *guards, *scored]))
        if baseline is not None and baseline.result is not None:
            comparisons = [compare(m, question_values(baseline, m), question_values(best, m)) for m in order]
        spread = noise.spreads if noise and noise.trial == best.number and noise.metric == view.target else None
        shares = attribute(best.result.questions, view.target, spread)
    effects = knob_effects(view)
    proposals = propose(view, effects, shares)
    space = None
    if view.space is not None and best is not None:
        space = next_space(view.space, proposals, dict(best.params), view.name)
    return Analysis(view, tuple(comparisons), shares, tuple(effects), noise, tuple(proposals), space)
