"""Analysis of a finished (or running) study: pure functions over its typed records, no model needed —
except the opt-in judge-noise measurement, whose results are saved and read back like trial files.

    analysis = analyze(read_study(folder))
    analysis.verdict.sentence()             # best vs baseline on held-out questions (when the study holds some out)
    analysis.comparisons[0].sentence()      # best vs baseline on the target in-sample, with its CI
    analysis.shares.limiting                # the stage that loses the most target points
    analysis.proposals, analysis.next_space # the next experiments
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.analysis.cheapest import Cheapest, cheapest_within_noise
from tuner.analysis.corrections import Corrections, corrections, stored_plan
from tuner.analysis.importance import KnobEffect, knob_effects
from tuner.analysis.noise import JudgeNoise, load_noise
from tuner.analysis.propose import Proposal, next_space, propose
from tuner.analysis.stages import StageShares, attribute
from tuner.analysis.stats import Comparison, compare_results
from tuner.analysis.testset import TestsetReading, read_testset
from tuner.analysis.verdict import Verdict, verdict
from tuner.evaluation.judge.check import CHECK_FILE, JudgeCheck, parse_checks
from tuner.evaluation.judge.cut import cut_of
from tuner.study.results import StudyView
from tuner.study.space import SearchSpace

__all__ = ["Analysis", "analyze"]


@dataclass(frozen=True)
class Analysis:
    view: StudyView
    verdict: Verdict | None  # None: the study holds no question out, or has no best vs baseline yet
    #: best vs baseline in-sample: the targets first, then guard metrics, then the other metrics the trials scored
    comparisons: tuple[Comparison, ...]
    shares: StageShares | None  # the best trial's lost target points by stage
    effects: tuple[KnobEffect, ...]
    noise: JudgeNoise | None
    judge_check: JudgeCheck | None  # the judge checked on labelled cases from this data (before trial 0)
    proposals: tuple[Proposal, ...]
    next_space: SearchSpace | None  # None: nothing left to search
    cheapest: Cheapest | None = None  # the cheapest trial within noise of the best on the quality target
    #: in-sample faithfulness corrected by human labels, for a study that holds nothing out (else the verdict's)
    corrections: Corrections | None = None
    #: a generated test set's figures and its agreement with the user's anchor questions (None: people's questions)
    testset: TestsetReading | None = None

    @property
    def headline(self) -> Comparison | None:
        return self.comparisons[0] if self.comparisons else None


def analyze(view: StudyView) -> Analysis:
    best, baseline = view.best, view.baseline
    comparisons: list[Comparison] = []
    shares, fixed = None, None
    noise = load_noise(view.folder)
    if best is not None and best.result is not None:
        if baseline is not None and baseline.result is not None:
            comparisons = list(compare_results(view.compared, baseline.result, best.result))
            if view.labels and not view.split.active:
                fixed = corrections(baseline.result, best.result, view.labels,
                                    names=("baseline", f"trial {best.number}"),
                                    read_at=cut_of(view.project.evaluation, best.result),
                                    plan=stored_plan(view.folder, {q.id for q in best.result.questions}))
        spread = noise.spreads if noise and noise.trial == best.number and noise.metric == view.target else None
        shares = attribute(best.result.questions, view.target, spread)
    effects = knob_effects(view)
    proposals = propose(view, effects, shares)
    space = None
    if view.space is not None and best is not None:
        space = next_space(view.space, proposals, dict(best.params), view.name)
    checks = parse_checks(view.folder.read_doc(CHECK_FILE))
    return Analysis(view, verdict(view), tuple(comparisons), shares, tuple(effects), noise,
                    checks[0] if checks else None, tuple(proposals), space, cheapest_within_noise(view), fixed,
                    read_testset(view))
