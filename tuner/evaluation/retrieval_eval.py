"""What one question's retrieval found, in records: where its gold documents were, and the passages selected."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tuner.evaluation.records import Passage, RetrievalTrace
from tuner.evaluation.retrieval_metrics import first_rank, question_metrics
from tuner.pipeline.candidate import Candidate

if TYPE_CHECKING:  # a type only: reading a study's records loads no retrieval stack
    from tuner.pipeline.run import RetrievalResult


def trace(result: RetrievalResult, gold: Iterable[str], top_k: int) -> RetrievalTrace:
    """Where the gold documents were: in the fused window, in the reranker's pool, among the selected chunks."""
    gold = frozenset(gold)
    if not gold:
        return RetrievalTrace()
    return RetrievalTrace(
        gold_ids=tuple(sorted(gold)),
        metrics=question_metrics(docs(result.ranking, gold), docs(result.selected, gold), gold, top_k),
        candidate_rank=first_rank(docs(result.retrieved, gold), gold),
        in_pool=tuple(sorted(gold.intersection(docs(result.pool, gold)))),
        selected=tuple(sorted(gold.intersection(docs(result.selected, gold)))),
    )


def trace_ids(ids: Sequence[str | None], gold: Iterable[str]) -> RetrievalTrace:
    """The trace of contexts that carry document ids, in the order a system returned them (its ranking and its
    selection at once). Contexts without ids give no id metrics: the trace says the gold ids, and nothing was
    traced."""
    gold = frozenset(gold)
    if not gold:
        return RetrievalTrace()
    if any(doc is None for doc in ids):
        return RetrievalTrace(gold_ids=tuple(sorted(gold)), traced=False)
    found = tuple(sorted(gold.intersection(ids)))
    return RetrievalTrace(gold_ids=tuple(sorted(gold)), metrics=question_metrics(ids, ids, gold, len(ids)),
                          candidate_rank=first_rank(ids, gold), in_pool=found, selected=found)


def docs(candidates: Iterable[Candidate], gold: frozenset[str]) -> list[str]:
    """The documents the candidates count as, in order. A RAPTOR summary counts as every gold document under it
    (it holds what they say) and takes one place when it covers none: one context must not push the passages
    after it down as if it were a result per document it summarises."""
    return [doc for c in candidates for doc in (c.chunk.covers and [d for d in c.chunk.covers if d in gold])
            or [c.chunk.doc_id]]


def passage(candidate: Candidate) -> Passage:
    return Passage(
        chunk_id=candidate.chunk.id,
        doc_id=candidate.chunk.doc_id,
        score=round(candidate.score, 6),
        confidence=None if candidate.confidence is None else round(candidate.confidence, 6),
        hop=candidate.hop,
        text=candidate.chunk.text,
    )
