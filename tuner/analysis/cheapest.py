"""The cheapest configuration within noise of the best: often most of the quality for a fraction of the cost.

Among the feasible complete trials, those the paired test cannot tell from the best on the quality target (not
distinguishably worse on the same questions) are as good as the data can say; the cheapest of them is the one to
deploy when cost matters."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.analysis.stats import Comparison, compare, per_question
from tuner.config import MODEL_KNOBS
from tuner.evaluation.records import Constraint
from tuner.metrics import COST_METRICS, lower_is_better
from tuner.study.results import StudyView, TrialRecord


@dataclass(frozen=True)
class Cheapest:
    quality: str  # the quality target the trials were compared on
    cost: str  # the cost metric they were ranked by
    best: TrialRecord  # the best on quality
    cheapest: TrialRecord  # the cheapest within noise of it (may be the best itself)
    versus_best: Comparison  # cheapest - best on quality, paired
    within_noise: int  # trials not distinguishably worse than the best, the best included

    def cost_of(self, trial: TrialRecord) -> float | None:
        return trial.result.value(self.cost) if trial.result else None

    def sentence(self) -> str:
        best, cheap = self.best, self.cheapest
        best_cost, cheap_cost = self.cost_of(best), self.cost_of(cheap)
        if cheap.number == best.number:
            return (f"The best trial on {self.quality} (trial {best.number}) is also the cheapest of the "
                    f"{self.within_noise} trial(s) within noise of it ({self.cost} {best_cost:.3g}).")
        ratio = f", {best_cost / cheap_cost:.1f}× cheaper" if cheap_cost else ""
        # a smaller model as good as the larger is the finding: named, not left to the parameters' table
        models = ", ".join(f"{n} {cheap.pipeline.get(n)} instead of {best.pipeline.get(n)}" for n in MODEL_KNOBS
                           if cheap.pipeline.get(n) != best.pipeline.get(n))
        return (f"Trial {cheap.number}{f' ({models})' if models else ''} costs {self.cost} {cheap_cost:.3g} against "
                f"the best's {best_cost:.3g}{ratio}, and its {self.quality} is not distinguishable from the best's "
                f"(trial {best.number}): "
                + self.versus_best.sentence(f"trial {cheap.number}", f"trial {best.number}"))


def cost_metric(view: StudyView) -> str:
    """The cost a study cares about: a cost target, else a cost guard, else the seconds per question."""
    guarded = [Constraint.parse(c).metric for c in view.constraints]
    return next((m for m in [*view.targets, *guarded] if m in COST_METRICS), "seconds_per_question")


def cheapest_within_noise(view: StudyView) -> Cheapest | None:
    """None when there is no quality target, no complete trial with a result, or no cost measured."""
    quality = next((t for t in view.targets if not lower_is_better(t)), None)
    if quality is None:
        return None
    trials = [t for t in view.trials if t.state == "complete" and t.feasible and t.result is not None
              and t.result.value(quality) is not None]
    if not trials:
        return None
    cost = cost_metric(view)
    best = max(trials, key=lambda t: (t.result.value(quality), -t.number))
    if best.result.value(cost) is None:  # its cost is unknown (answers cached before seconds were kept)
        return None
    reference = per_question(best.result, quality)
    close = [(t, compare(quality, reference, per_question(t.result, quality))) for t in trials]
    close = [(t, c) for t, c in close if c.verdict != "worse" and t.result.value(cost) is not None]
    if not close:
        return None
    cheapest, versus = min(close, key=lambda pair: (pair[0].result.value(cost), pair[0].number))
    return Cheapest(quality, cost, best, cheapest, versus, len(close))
