"""Run one pipeline configuration over a dataset's questions and score retrieval."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tuner.config import PipelineConfig
from tuner.data import Dataset
from tuner.evaluation.records import Passage, RetrievalTrace
from tuner.evaluation.retrieval_metrics import aggregate, first_rank, question_metrics
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.run import RetrievalPipeline, RetrievalResult


def trace(result: RetrievalResult, gold: Iterable[str], top_k: int) -> RetrievalTrace:
    """Where the gold documents were: in the fused window, in the reranker's pool, among the selected chunks."""
    gold = frozenset(gold)
    if not gold:
        return RetrievalTrace()
    docs = lambda candidates: [c.chunk.doc_id for c in candidates]  # noqa: E731
    return RetrievalTrace(
        gold_ids=tuple(sorted(gold)),
        metrics=question_metrics(docs(result.ranking), docs(result.selected), gold, top_k),
        candidate_rank=first_rank(docs(result.retrieved), gold),
        in_pool=tuple(sorted(gold.intersection(docs(result.pool)))),
        selected=tuple(sorted(gold.intersection(docs(result.selected)))),
    )


def evaluate_retrieval(
    dataset: Dataset,
    pipeline: RetrievalPipeline,
    config: PipelineConfig,
    on_question: Callable[[], None] | None = None,
) -> dict[str, Any]:
    per_question = []
    for question in dataset.questions:
        result = pipeline.run(question.text, config)
        found = trace(result, question.relevant_ids, config.top_k)
        per_question.append(
            {
                "id": question.id,
                "question": question.text,
                "gold_ids": list(found.gold_ids),
                "gold_rank": found.candidate_rank,
                "k": len(result.selected),
                "selected": [passage(c).to_json() for c in result.selected],
                "retrieval": dict(found.metrics),
            }
        )
        if on_question:
            on_question()
    summary = aggregate([q["retrieval"] for q in per_question], [q["k"] for q in per_question])
    return {"retrieval": summary, "per_question": per_question}


def passage(candidate: Candidate) -> Passage:
    return Passage(
        chunk_id=candidate.chunk.id,
        doc_id=candidate.chunk.doc_id,
        score=round(candidate.score, 6),
        confidence=None if candidate.confidence is None else round(candidate.confidence, 6),
        hop=candidate.hop,
        text=candidate.chunk.text,
    )
