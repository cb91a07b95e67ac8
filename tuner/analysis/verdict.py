"""The verdict: is the best configuration's gain real on questions the search never saw?

The search picks its best trial on the search questions, so its in-sample gain carries the winner's curse. The
verdict scores the best trial and the baseline on the held-out questions and compares them there, paired by
question, with the same bootstrap CI as every comparison. When other trials are within noise of the best
(the best's in-sample lead over them is not distinguishable from zero), the top few are scored on held-out too,
and the verdict says which generalises best — a figure that is itself chosen on held-out data, so mildly
optimistic, which the sentence says.

    view = read_study(folder)
    give_verdict(view, runner)            # scores what is missing (LLM calls), returns the view read again
    verdict(view).sentence()              # pure: reads the held-out files
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tuner.analysis.corrections import Corrections, corrections, none_matched, reading, stored_plan
from tuner.analysis.ppi import Corrected
from tuner.analysis.stats import Comparison, compare, compare_results, per_question
from tuner.data.split import Split
from tuner.evaluation.judge.cut import cut_of
from tuner.evaluation.labels import LABELLED_METRIC
from tuner.study.results import StudyView, TrialRecord

if TYPE_CHECKING:
    from tuner.evaluation.rag_eval import RagRunner

#: trials scored on held-out at most, the best included (the baseline comes on top)
CONTENDERS = 3


def contenders(view: StudyView, top: int = CONTENDERS) -> list[TrialRecord]:
    """The trials the verdict scores besides the baseline: the best, then (best first) the complete feasible
    trials it does not beat distinguishably on the search questions, at most `top` in all. Single target only."""
    best = view.best
    if best is None or best.result is None:
        return []
    done = [t for t in view.trials if t.state == "complete" and t.feasible and t.values and t.result]
    chosen = [best]
    for trial in sorted(done, key=lambda t: (-t.values[0], t.number)):
        if len(chosen) >= top:
            break
        if trial is best or (view.baseline is not None and trial.number == view.baseline.number):
            continue  # the baseline is compared with, not among the contenders
        lead = compare(view.target, per_question(trial.result, view.target), per_question(best.result, view.target))
        if lead.verdict != "better":
            chosen.append(trial)
    return chosen


def to_score(view: StudyView, top: int = CONTENDERS) -> list[TrialRecord]:
    """Contenders and the baseline that have no held-out evaluation yet."""
    if not view.split.active or view.best is None:
        return []
    wanted = contenders(view, top)
    if view.baseline is not None and view.baseline.result is not None and view.baseline not in wanted:
        wanted.append(view.baseline)
    return [t for t in wanted if t.holdout is None]


@dataclass(frozen=True)
class Contender:
    trial: TrialRecord
    in_sample: float  # the target's mean on the search questions (the trial's value)
    held_out: Comparison | None  # vs the baseline on the held-out questions; None: not scored yet


@dataclass(frozen=True)
class Verdict:
    metric: str
    split: Split
    best: TrialRecord
    baseline: TrialRecord
    in_sample: Comparison  # best vs baseline on the search questions
    held_out: tuple[Comparison, ...]  # best vs baseline on the held-out questions, target first; () if not scored
    contenders: tuple[Contender, ...]
    #: faithfulness on the held-out answers corrected by human labels; None: no label on them
    corrections: Corrections | None = None
    #: the study's human labels, matching answers compared or not (none matching is said, not left silent)
    labels_given: int = 0

    @property
    def corrected(self) -> Corrected | None:
        """The labels' figure for the headline, when the target is what they measure: the verdict reads it."""
        return self.corrections.difference if self.corrections and self.metric == LABELLED_METRIC else None

    def held_out_mean(self, contender: Contender) -> float | None:
        """A contender's held-out target mean: corrected by the labels when the verdict reads them."""
        if self.corrected is not None:
            mean = self.corrections.means.get(f"trial {contender.trial.number}")
            return None if mean is None else mean.estimate
        return None if contender.held_out is None else contender.held_out.candidate_mean

    @property
    def headline(self) -> Comparison | None:
        return self.held_out[0] if self.held_out else None

    @property
    def pending(self) -> bool:
        return not self.held_out or any(c.held_out is None for c in self.contenders)

    @property
    def holds(self) -> bool:
        """The gain is distinguishable from zero on unseen questions (by the labels' figure when there is one)."""
        if self.corrected is not None:
            return reading(self.corrected) == "better"
        return self.headline is not None and self.headline.verdict == "better"

    @property
    def generalises_best(self) -> Contender | None:
        """Among contenders scored on held-out, the one with the highest held-out mean (corrected, when the verdict
        reads the labels); None on a tie."""
        scored = sorted((c for c in self.contenders if self.held_out_mean(c) is not None),
                        key=lambda c: -self.held_out_mean(c))
        if len(scored) < 2 or self.held_out_mean(scored[0]) == self.held_out_mean(scored[1]):
            return None
        return scored[0]

    def sentence(self) -> str:
        """The verdict in plain words."""
        best = f"trial {self.best.number}"
        head = self.headline
        if self.best.number == self.baseline.number:
            return "The baseline stayed the best trial: there is no gain to check on held-out questions."
        if head is None:
            return (f"Not yet judged on the {len(self.split.holdout_ids)} held-out questions: "
                    f"`tuner best --verdict` scores {best} and the baseline on them.")
        if head.ci is None:
            return f"No held-out question was scored on {self.metric} for both {best} and the baseline."
        ci = f"95 % CI [{head.ci[0]:+.3f}, {head.ci[1]:+.3f}], {head.n} held-out questions"
        seen = self.in_sample.mean_difference
        in_sample = "" if seen is None else f" (in-sample: {seen:+.3f})"
        if head.verdict == "better":
            meaning = "the gain holds on unseen questions"
        elif head.verdict == "worse":
            meaning = "the configuration is worse than the baseline on unseen questions: the in-sample gain did " \
                      "not generalise"
        elif head.verdict == "no difference":
            meaning = "it scores exactly like the baseline on every unseen question: the in-sample gain was luck"
        else:
            meaning = "the gain is not distinguishable from zero on unseen questions — the in-sample gain could " \
                      "be luck"
        said = (f"On questions the search never saw, {best} vs the baseline on {self.metric}: "
                f"{head.reference_mean:.3f} → {head.candidate_mean:.3f}, {head.mean_difference:+.3f} ({ci})"
                f"{in_sample}: {meaning}.")
        if self.corrections is None:
            return said + (" " + none_matched(self.labels_given) if self.labels_given else "")
        said += " " + self.corrections.sentence(best, "the baseline")
        if self.corrected is not None and (reading(self.corrected) == "better") != (head.verdict == "better"):
            said += " The labels change the verdict: it reads the corrected figure."
        return said


def verdict(view: StudyView) -> Verdict | None:
    """The verdict from the held-out files; None when the study holds nothing out or has no best vs baseline."""
    best, baseline = view.best, view.baseline
    if not view.split.active or best is None or baseline is None or best.result is None or baseline.result is None:
        return None
    metric = view.target
    in_sample = compare(metric, per_question(baseline.result, metric), per_question(best.result, metric))
    held_out: tuple[Comparison, ...] = ()
    if best.held_out is not None and baseline.held_out is not None:
        held_out = compare_results(view.compared, baseline.held_out, best.held_out)
    rivals = tuple(
        Contender(t, t.values[0], None if t.held_out is None or baseline.held_out is None else
                  compare(metric, per_question(baseline.held_out, metric), per_question(t.held_out, metric)))
        for t in contenders(view))
    corrected = None
    if view.labels and held_out:
        corrected = corrections(baseline.held_out, best.held_out, view.labels,
                                {f"trial {c.trial.number}": c.trial.held_out for c in rivals if c.held_out},
                                ("baseline", f"trial {best.number}"),
                                cut_of(view.project.evaluation, best.held_out),
                                stored_plan(view.folder, {q.id for q in best.held_out.questions}))
    return Verdict(metric, view.split, best, baseline, in_sample, held_out, rivals, corrected,
                   len(view.labels) if held_out else 0)


def give_verdict(view: StudyView, runner: RagRunner,
                 on_trial: Callable[[TrialRecord, int, int], None] | None = None,
                 on_progress: Callable[[int, str, str], None] | None = None) -> StudyView:
    """Score on held-out whatever the verdict still needs (through the study's caches); the view read again.
    `on_trial(trial, index, count)` announces each trial scored."""
    from tuner.study.holdout import score_held_out

    pending = to_score(view)
    metrics = list(view.meta.metrics)
    scored = {}
    for index, trial in enumerate(pending):
        if on_trial:
            on_trial(trial, index, len(pending))
        scored[trial.number] = score_held_out(runner, view.folder, view.split, trial, metrics, on_progress)
    return replace(view, trials=tuple(replace(t, holdout=scored.get(t.number, t.holdout)) for t in view.trials))
