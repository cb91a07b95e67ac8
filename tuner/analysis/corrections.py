"""What human labels say of a comparison: the judge's agreement with them and the PPI-corrected faithfulness figures.

The judge scores every answer; a person labels a few (`tuner judge label`). On the labelled answers the judge's
error is measured, and every faithfulness mean or paired difference gets a PPI-corrected estimate and interval
beside the judge's own (tuner/analysis/ppi.py). The search still optimises the judge's score — labels are too few
to search on — but the verdict, `tuner best --verdict` and `tuner compare` read the corrected figure when there is
one.

    corrections(baseline_result, best_result, labels)     # the held-out pair, and any contenders
    corrections(...).sentence("trial 7", "the baseline")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tuner.analysis.ppi import DIFFERENCE, MIN_LABELLED, Corrected, Plan, correct, correct_difference, planned_mean
from tuner.analysis.stats import per_question
from tuner.evaluation.judge.agreement import auc, best_cut, cross_validated
from tuner.evaluation.judge.cut import MIDDLE
from tuner.evaluation.labels import LABELLED_METRIC, Label, fingerprint, given
from tuner.evaluation.records import EvalResult


def human_scores(result: EvalResult | None, labels: Mapping[str, Label]) -> dict[str, float]:
    """{question id: 1 supported / 0 not} for the answers of `result` a person labelled (by the answer's identity, so
    another trial's identical answer counts)."""
    if result is None:
        return {}
    return {q.id: labels[key].value for q in result.questions
            if (key := fingerprint(q)) in labels and labels[key].supported is not None}


#: the study document holding its labelling plan (tuner/analysis/labelling.py)
PLAN_FILE = "label_plan.json"


def stored_plan(folder, questions: set[str]) -> Plan | None:
    """The plan a study's labels were asked under, when it is for these questions; None: none was kept (labels
    given in the near-uniform order of before), or it was for other questions."""
    data = folder.read_doc(PLAN_FILE)
    plan = None if data is None else Plan.from_json(data)
    return plan if plan is not None and set(plan.chances) == questions else None


def keep_plan(folder, plan: Plan) -> None:
    folder.write_doc(PLAN_FILE, plan.to_json())


def reading(corrected: Corrected) -> str:
    """better | worse | undecided, for a difference."""
    low, high = corrected.ci
    return "better" if low > 0 else "worse" if high < 0 else "undecided"


@dataclass(frozen=True)
class Agreement:
    """The judge against the labels, on the labelled answers it scored."""

    answers: int
    supported: int  # of them, labelled supported
    accuracy: float  # the judge's score on the label's side of `read_at`
    auc: float | None  # the chance a supported answer outscores an unsupported one; None: one class only
    bias: float  # mean(judge − label): above 0 the judge is lenient, below it strict
    judge_mean: float
    human_mean: float
    #: the cut the labels themselves give (best balanced accuracy on them), and the balanced accuracy of a cut
    #: chosen on other labels than those it classifies (5-fold; None with fewer than 5 of a class)
    cut: float | None = None
    balanced_accuracy: float | None = None
    read_at: float = MIDDLE  # the judge's cut (`judge_cut`): where its score reads as supported

    @classmethod
    def of(cls, pairs: Sequence[tuple[float, float]], read_at: float = MIDDLE) -> Agreement | None:
        """`pairs`: (judge score, label 1/0) per labelled answer; `read_at`: the judge's cut."""
        if not pairs:
            return None
        judge, human = [p[0] for p in pairs], [p[1] for p in pairs]
        n = len(pairs)
        verdicts = [(f, y == 1) for f, y in pairs]
        return cls(n, int(sum(human)), sum((f >= read_at) == (y == 1) for f, y in pairs) / n,
                   auc([f for f, y in pairs if y == 1], [f for f, y in pairs if y == 0]),
                   (sum(judge) - sum(human)) / n, sum(judge) / n, sum(human) / n,
                   best_cut(verdicts), cross_validated(verdicts), read_at)

    def sentence(self) -> str:
        separation = "one class only, so no AUC" if self.auc is None else f"AUC {self.auc:.2f}"
        lean = "lenient" if self.bias > 0 else "strict" if self.bias < 0 else "unbiased"
        cut = "" if self.cut is None else f"; the labels' own cut is {self.cut:.2f}" + (
            "" if self.balanced_accuracy is None else
            f" (balanced accuracy {self.balanced_accuracy:.2f} when chosen on other labels: evaluation.cut)")
        return (f"on {self.answers} labelled answers ({self.supported} supported) the judge agrees with the labels "
                f"on {self.accuracy:.0%} at {self.read_at:.2f} ({separation}) and is {lean} by {self.bias:+.3f} "
                f"(judge {self.judge_mean:.3f} vs labels {self.human_mean:.3f}){cut}")


def agreement(results: Iterable[EvalResult | None], labels: Mapping[str, Label],
              read_at: float = MIDDLE) -> Agreement | None:
    """The judge's faithfulness against the labels, each distinct labelled answer once, read at the judge's cut."""
    labels = given(labels)
    pairs: dict[str, tuple[float, float]] = {}
    for result in results:
        for q in result.questions if result else ():
            score = q.value(LABELLED_METRIC)
            if (key := fingerprint(q)) in labels and score is not None:
                pairs[key] = (score, labels[key].value)
    return Agreement.of(list(pairs.values()), read_at)


@dataclass(frozen=True)
class Corrections:
    """Faithfulness of a reference and a candidate (and any other configurations on the same questions), as the
    judge scored it and corrected by the labels."""

    labels: int  # labelled answers among those compared
    agreement: Agreement | None
    difference: Corrected | None  # candidate − reference, paired; None: too few questions with both labelled
    judge_difference: float | None
    means: Mapping[str, Corrected | None]  # name -> corrected mean

    def sentence(self, candidate: str, reference: str) -> str:
        if self.difference is None:
            return (f"{self.labels} human label(s) on these answers: too few to correct faithfulness (a corrected "
                    f"difference needs {MIN_LABELLED} questions whose two answers are both labelled)"
                    + (f"; {self.agreement.sentence()}" if self.agreement else "") + ".")
        d = self.difference
        judged = "" if self.judge_difference is None else f" (the judge alone: {self.judge_difference:+.3f})"
        said = {"better": f"{candidate} is more faithful than {reference}",
                "worse": f"{candidate} is less faithful than {reference}",
                "undecided": "not distinguishable from zero"}[reading(d)]
        how = f"prediction-powered, {d.labelled} questions with both answers labelled" if d.draws is None else (
            f"asked where they decide: the labelling plan's first {d.draws} draws, {d.labelled} questions; an interval "
            f"that holds wherever the labelling stopped")
        return (f"Corrected by {self.labels} human labels ({how}), {candidate} − {reference} on faithfulness is "
                f"{d.estimate:+.3f} (95 % CI [{d.ci[0]:+.3f}, {d.ci[1]:+.3f}]){judged}: {said}"
                + (f"; {self.agreement.sentence()}" if self.agreement else "") + ".")


def none_matched(count: int) -> str:
    """What `count` human labels that fit no answer compared mean, said where the corrected figures would be."""
    return (f"None of the {count} human label(s) given belongs to an answer compared here (a label is kept for the "
            f"exact answer it was given to: answers that changed carry none), so every figure is the judge's alone; "
            f"`tuner judge label` labels these answers.")


def corrections(reference: EvalResult, candidate: EvalResult, labels: Mapping[str, Label],
                others: Mapping[str, EvalResult] | None = None,
                names: tuple[str, str] = ("reference", "candidate"), read_at: float = MIDDLE,
                plan: Plan | None = None) -> Corrections | None:
    """None when no answer compared carries a label; `read_at`: the judge's cut, where the agreement reads it;
    `plan`: the labelling plan the labels were asked under (None: a near-uniform sample, read by PPI++)."""
    results = {names[0]: reference, names[1]: candidate, **(others or {})}
    human = {name: human_scores(result, labels) for name, result in results.items()}
    labelled = {fingerprint(q) for name, result in results.items() for q in result.questions
                if q.id in human[name]}
    if not labelled:
        return None
    judge = {name: per_question(result, LABELLED_METRIC) for name, result in results.items()}
    paired = [q for q in judge[names[0]] if judge[names[0]][q] is not None and judge[names[1]].get(q) is not None]
    judge_difference = (sum(judge[names[1]][q] - judge[names[0]][q] for q in paired) / len(paired)) if paired \
        else None
    if plan is None:
        difference = correct_difference(judge[names[0]], judge[names[1]], human[names[0]], human[names[1]])
        means = {name: correct(judge[name], human[name]) for name in results}
    else:
        difference = planned_difference(reference, candidate, judge[names[0]], judge[names[1]],
                                        human[names[0]], human[names[1]], plan)
        means = {name: planned_mean(judge[name], human[name], plan) for name in results}
    return Corrections(len(labelled), agreement(results.values(), labels, read_at), difference, judge_difference,
                       means)


def planned_difference(reference: EvalResult, candidate: EvalResult, judge_reference, judge_candidate,
                       human_reference, human_candidate, plan: Plan) -> Corrected | None:
    """candidate − reference under the plan: a question whose two answers are the same has a known difference of
    zero, labelled or not."""
    same = {q.id for q, r in zip(sorted(candidate.questions, key=lambda q: q.id),
                                 sorted(reference.questions, key=lambda q: q.id))
            if q.id == r.id and fingerprint(q) == fingerprint(r)}
    judged = {q: None if judge_reference.get(q) is None or judge_candidate[q] is None else
              judge_candidate[q] - judge_reference[q] for q in judge_candidate if q in judge_reference}
    human = {q: 0.0 if q in same else human_candidate[q] - human_reference[q] for q in judged
             if q in same or (q in human_reference and q in human_candidate)}
    return planned_mean(judged, human, plan, span=DIFFERENCE)
