"""The score an optimizer maximises: the target metric from tuner's cached judge, under rules that make saying
nothing lose.

- A refusal scores 0 when a gold context was among the contexts (declining an answerable question is no
  faithful answer); under any refusal rule, since an optimizer given a way to skip hard questions takes it.
- An answer the judge could not score (unparsable, nothing extracted) scores 0: no free pass.
- A guard (e.g. answer_relevancy>=0.5) vetoes: an answer below it scores 0, whatever its target score.

GEPA also reads why a score was lost (`feedback`): the statements the judge found unsupported, a refusal that
had its answer in the contexts, a guard that vetoed.
"""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from tuner.cost import CostMeter
from tuner.evaluation.ragas_judge import RagasScorer
from tuner.evaluation.records import Constraint
from tuner.prompts.programs import is_refusal


@dataclass(frozen=True)
class Feedback:
    score: float
    feedback: str


@dataclass
class CompileMetric:
    scorer: RagasScorer
    meter: CostMeter
    target: str = "faithfulness"
    guard: Constraint | None = None
    #: called after each scored answer (progress display)
    on_score: object = None

    def score(self, example: dspy.Example, answer: str) -> Feedback:
        answer = (answer or "").strip()
        if not answer:
            return self._done(Feedback(0.0, "The program produced no answer. Answer in the required format."))
        if is_refusal(answer) and example.answerable:
            return self._done(Feedback(0.0, "The answer declined, but the contexts hold the answer: answer the "
                                          "question from them, citing the context numbers."))
        with self.meter.stage(example.id, "compile"):
            outcome = self.scorer.score(self.target, example.question, answer, list(example.contexts),
                                        example.reference)
            verdicts = unsupported(self.scorer.judge.replies)
            guard_value = None
            if self.guard is not None:
                guard_value = self.scorer.score(self.guard.metric, example.question, answer, list(example.contexts),
                                                example.reference).value
        if outcome.value is None:
            return self._done(Feedback(0.0, f"The judge could not score the answer ({outcome.failure}): write short, "
                                          f"plain factual sentences."))
        if self.guard is not None and self.guard.violation(guard_value) > 0:
            shown = "unscored" if guard_value is None else f"{guard_value:.2f}"
            return self._done(Feedback(0.0, f"{self.guard.metric} was {shown}, below the guard {self.guard}: the "
                                          f"answer must address the question asked."))
        feedback = f"{self.target} {outcome.value:.2f}."
        if verdicts:
            feedback += " Not supported by the contexts: " + " | ".join(verdicts[:5])
        return self._done(Feedback(float(outcome.value), feedback))

    def _done(self, scored: Feedback) -> Feedback:
        if callable(self.on_score):
            self.on_score(scored)
        return scored

    def __call__(self, example: dspy.Example, prediction: dspy.Prediction, trace=None) -> float:
        """DSPy's metric signature (bootstrap, MIPROv2)."""
        return self.score(example, prediction.answer).score

    def with_feedback(self):
        """GEPA's metric signature: five arguments, a score with the reason it was lost."""
        def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None) -> dspy.Prediction:
            scored = self.score(gold, pred.answer)
            return dspy.Prediction(score=scored.score, feedback=scored.feedback)

        return gepa_metric


def unsupported(replies) -> list[str]:
    """The statements RAGAS's NLI step judged unsupported (verdict 0), from the judge's parsed replies."""
    found = []
    for reply in replies:
        for item in getattr(reply, "statements", None) or []:
            if getattr(item, "verdict", 1) == 0:
                found.append(str(getattr(item, "statement", "")))
    return found
