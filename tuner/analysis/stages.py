"""Where the target is lost: each question's shortfall attributed to one pipeline stage.

From what a trial recorded per question (where the gold documents were, what was selected, the scores and
failures, and optionally the judge's spread across re-judgings):

* retrieval  — a gold document never reached the reranker's pool (not among the candidates / top_k);
* selection  — every missing gold document was in the pool, but reranking or dynamic K dropped it;
* generation — the selected contexts hold the gold documents, yet the answer is unfaithful, irrelevant or a refusal;
* judge      — the question was not scored (unparsable / NaN verdict), or re-judging showed the verdict unstable;
* unknown    — no gold ids and no context recall: retrieval and generation cannot be told apart here.

Retrieval targets (recall@k, nDCG, …) are only lost to retrieval or selection. A question's loss is how far it
falls short of the target's best value, in the target's units (its `MetricSpec` says the range and direction; an
unscored question loses the whole range). A target with no best value, and a cost target (spent by stages of the
pipeline, not lost by them: the trial table's cost per stage says where), is not attributed, and the reason is
said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.evaluation.records import QuestionResult
from tuner.metrics import REGISTRY, RETRIEVAL_METRICS

STAGES = ("retrieval", "selection", "generation", "judge", "unknown")
#: a verdict whose re-judged scores span at least this much is the judge's, not the pipeline's
UNSTABLE_SPREAD = 0.5
#: without gold ids, context recall below this means the contexts lack the reference's claims
RECALL_MISSING = 0.5


@dataclass(frozen=True)
class QuestionLoss:
    question_id: str
    question: str
    score: float | None
    loss: float  # target points lost (the best value - score; the whole range when unscored)
    stage: str
    why: str


@dataclass(frozen=True)
class StageShares:
    target: str
    losses: tuple[QuestionLoss, ...]  # questions that lost points, worst first
    #: why the target's losses are not attributed to stages ("" when they are)
    unattributed: str = ""

    @property
    def total(self) -> float:
        return sum(q.loss for q in self.losses)

    def share(self, stage: str) -> float:
        return sum(q.loss for q in self.losses if q.stage == stage) / self.total if self.total else 0.0

    def questions(self, stage: str) -> list[QuestionLoss]:
        return [q for q in self.losses if q.stage == stage]

    @property
    def caption(self) -> str:
        """One line on the whole: the limiting stage, nothing lost, or why nothing is attributed."""
        if self.unattributed:
            return f"not attributed to stages: {self.unattributed}"
        return f"limiting stage: {self.limiting}" if self.limiting else "nothing lost"

    @property
    def limiting(self) -> str | None:
        """The stage that loses the most target points (None when nothing is lost)."""
        if not self.total:
            return None
        return max(STAGES, key=self.share)


def attribute(questions: Sequence[QuestionResult], target: str,
              judge_spread: Mapping[str, float] | None = None) -> StageShares:
    """Attribute each question's lost target points to one stage (see the module docstring)."""
    spec = REGISTRY[target]
    if spec.kind == "cost":
        return StageShares(target, (), f"{target} is a cost: every stage spends it (the trial's cost per stage "
                                       f"says where), none loses it")
    if spec.best is None or spec.high is None:
        return StageShares(target, (), f"{target} has no {'best' if spec.best is None else 'worst'} value "
                                       f"({spec.low:g} to {'∞' if spec.high is None else f'{spec.high:g}'}, "
                                       f"{'lower' if spec.lower_is_better else 'higher'} is better): no question's "
                                       f"shortfall can be measured")
    losses = []
    for q in questions:
        score = q.value(target)
        if score is None and target in RETRIEVAL_METRICS:
            continue  # no gold ids: the question is not in the target's mean, so it loses nothing
        loss = spec.high - spec.low if score is None else spec.shortfall(score)
        if loss <= 1e-9:
            continue
        stage, why = _stage(q, target, score, (judge_spread or {}).get(q.id))
        losses.append(QuestionLoss(q.id, q.question, score, loss, stage, why))
    losses.sort(key=lambda item: (-item.loss, item.question_id))
    return StageShares(target, tuple(losses))


def _stage(q: QuestionResult, target: str, score: float | None, spread: float | None) -> tuple[str, str]:
    trace = q.retrieval
    missing = set(trace.gold_ids) - set(trace.selected)
    if target in RETRIEVAL_METRICS:  # scored, so the question has gold ids
        lost_before_pool = set(trace.gold_ids) - set(trace.in_pool)
        if lost_before_pool and trace.traced:
            return "retrieval", _where(trace.candidate_rank)
        return "selection", "every gold document reached the pool; the reranked order or the cut lost points"

    if score is None:
        failure = q.failures.get(target)
        reason = failure.reason if failure else "not scored"
        if reason == "no_contexts":
            return "selection", "dynamic K selected no context"
        if reason == "no_answer" or q.generation_error:
            return "generation", "no answer was produced"
        return "judge", f"not scored: {reason}"
    if spread is not None and spread >= UNSTABLE_SPREAD:
        return "judge", f"verdict unstable: re-judged scores span {spread:.2f}"
    if trace.has_gold and trace.traced:
        if missing - set(trace.in_pool):
            return "retrieval", f"{_where(trace.candidate_rank)}; {len(missing)} of {len(trace.gold_ids)} gold " \
                                f"document(s) not selected"
        if missing:
            return "selection", f"{len(missing)} gold document(s) reached the pool but were not selected"
        return "generation", "refusal despite the gold context" if q.refusal else "gold context selected"
    recall = q.value("context_recall")
    if recall is not None:
        if recall < RECALL_MISSING:
            return "retrieval", f"context recall {recall:.2f}: the contexts lack the reference's claims"
        return "generation", f"context recall {recall:.2f}: the contexts hold the answer"
    if "context_recall" in q.scores:
        return "unknown", "no gold ids, and the judge could not score context recall for this question"
    return "unknown", "no gold ids or context recall to check retrieval"


def _where(rank: int | None) -> str:
    return "gold not among the candidates" if rank is None else f"first gold document at candidate rank {rank}"
