"""Run one pipeline configuration over a dataset's questions and score retrieval."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.config import PipelineConfig
from tuner.data import Dataset
from tuner.evaluation.retrieval_metrics import aggregate, question_metrics
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.run import RetrievalPipeline


def evaluate_retrieval(
    dataset: Dataset,
    pipeline: RetrievalPipeline,
    config: PipelineConfig,
    on_question: Callable[[], None] | None = None,
) -> dict[str, Any]:
    per_question = []
    for question in dataset.questions:
        result = pipeline.run(question.text, config)
        metrics = {}
        if question.relevant_ids:
            metrics = question_metrics(
                [c.chunk.doc_id for c in result.ranking],
                [c.chunk.doc_id for c in result.selected],
                question.relevant_ids,
                config.top_k,
            )
        per_question.append(
            {
                "id": question.id,
                "question": question.text,
                "gold_ids": sorted(question.relevant_ids),
                "k": len(result.selected),
                "selected": [describe(c) for c in result.selected],
                "retrieval": metrics,
            }
        )
        if on_question:
            on_question()
    summary = aggregate([q["retrieval"] for q in per_question], [q["k"] for q in per_question])
    return {"retrieval": summary, "per_question": per_question}


def describe(candidate: Candidate) -> dict[str, Any]:
    return {
        "chunk_id": candidate.chunk.id,
        "doc_id": candidate.chunk.doc_id,
        "score": round(candidate.score, 6),
        "confidence": None if candidate.confidence is None else round(candidate.confidence, 6),
        "hop": candidate.hop,
        "text": candidate.chunk.text,
    }
