"""Typed results: what one question, one evaluation and one study trial produced.

Frozen records with `to_json`/`from_json` replace dicts read by string keys, so analysis and reports build on
named fields. Every trial file carries `schema`; files written before it existed (schema 1) still load, the
fields they lack left empty, and a file from a newer tuner fails with one clear line.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.cost import Cost
from tuner.data import Dataset
from tuner.errors import ConfigError, DataError, first_line
from tuner.metrics import COST_METRICS, REGISTRY, RETRIEVAL_METRICS, SCORED_METRICS, TARGETS
from tuner.versioned import check_schema

SCHEMA_VERSION = 2


def unscorable(metric: str, dataset: Dataset) -> str | None:
    """Why `metric` cannot be computed on any question of `dataset` (it lacks the metric's inputs); None if it
    can be."""
    if metric in RETRIEVAL_METRICS and not dataset.has_gold_ids:
        return f"{metric} needs gold document ids (qrels), and {dataset.name} has none"
    if metric in REGISTRY and "reference" in REGISTRY[metric].needs and not dataset.has_references:
        return f"{metric} needs reference answers, and {dataset.name} has none"
    return None


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str  # ">=" or "<="
    bound: float

    @classmethod
    def parse(cls, text: str, option: str = "--constraint") -> Constraint:
        """`option`: what the user typed it as, for the error."""
        match = re.fullmatch(r"\s*([\w@]+)\s*(>=|<=)\s*([0-9]*\.?[0-9]+)\s*", text)
        if not match or match.group(1) not in TARGETS:
            raise ConfigError(f"{option} {text!r}: expected METRIC>=VALUE or METRIC<=VALUE with METRIC one of "
                              f"{', '.join(TARGETS)}")
        return cls(match.group(1), match.group(2), float(match.group(3)))

    def violation(self, value: float | None) -> float:
        """Optuna's convention: <= 0 is feasible. An unscored guard metric counts as violated."""
        if value is None:
            return 1.0
        return self.bound - value if self.op == ">=" else value - self.bound

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.bound:g}"


def clean(value: float | None) -> float | None:
    """A score or None: NaN (what RAGAS returns when it extracted nothing) is not a number to average."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


@dataclass(frozen=True)
class Failure:
    # nan | unparsable | no_answer | no_contexts | no_reference | too_long | error | refusal | system (the user's
    # system gave no reply to judge); empty (and refusal
    # under the rule): 0
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class Passage:
    """A chunk that reached the generator."""

    chunk_id: str
    doc_id: str
    score: float
    confidence: float | None
    hop: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "doc_id": self.doc_id, "score": self.score,
                "confidence": self.confidence, "hop": self.hop, "text": self.text}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Passage:
        return cls(str(data["chunk_id"]), str(data["doc_id"]), float(data["score"]), data.get("confidence"),
                   int(data.get("hop", 0)), data.get("text", ""))


@dataclass(frozen=True)
class RetrievalTrace:
    """Where a question's gold documents were along the pipeline, and its id-based metrics."""

    gold_ids: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)
    #: doc-level rank (1 = first) of the best-placed gold document in the fused window; None: not in it
    candidate_rank: int | None = None
    #: gold documents that reached the pool the reranker sees (top_k seeds + graph expansion)
    in_pool: tuple[str, ...] = ()
    #: gold documents among the selected chunks
    selected: tuple[str, ...] = ()
    #: False for files written before traces were recorded: the stage of a loss cannot be told from them
    traced: bool = True

    @property
    def has_gold(self) -> bool:
        return bool(self.gold_ids)


@dataclass(frozen=True)
class QuestionResult:
    id: str
    question: str
    reference: str | None
    answer: str
    contexts: tuple[str, ...]
    selected: tuple[Passage, ...]
    retrieval: RetrievalTrace
    scores: Mapping[str, float | None]
    failures: Mapping[str, Failure] = field(default_factory=dict)
    cost: Mapping[str, Cost] = field(default_factory=dict)
    citations: tuple[int, ...] = ()
    generation_error: str | None = None
    refusal: bool = False
    #: what the query strategy searched besides the question (a passage, sub-questions, paraphrases)
    searched: tuple[str, ...] = ()
    #: the query strategy's rewrite was empty or did not parse: the question alone was searched
    query_fell_back: bool = False
    #: tokens of the selected contexts (the generator's tokenizer when it answered, else 3 characters a token)
    context_tokens: int | None = None

    @property
    def k(self) -> int:
        return len(self.selected)

    def value(self, metric: str) -> float | None:
        if metric in RETRIEVAL_METRICS:
            return clean(self.retrieval.metrics.get(metric))
        if metric in COST_METRICS:
            return self.cost_of(metric)
        return clean(self.scores.get(metric))

    def cost_of(self, metric: str) -> float | None:
        """The pipeline's cost of this question (the judge's stages left out); None: not known."""
        if metric == "context_tokens":
            return None if self.context_tokens is None else float(self.context_tokens)
        spent = [c for stage, c in self.cost.items() if stage not in SCORED_METRICS]
        if metric == "tokens_per_question":
            return float(sum(c.cold_tokens for c in spent))
        if not spent or any(c.unmetered_hits for c in spent):
            return None
        return sum(c.cold_seconds for c in spent)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "question": self.question, "reference": self.reference, "answer": self.answer,
            "citations": list(self.citations), "generation_error": self.generation_error, "refusal": self.refusal,
            "searched": list(self.searched), "query_fell_back": self.query_fell_back,
            "contexts": list(self.contexts), "selected": [p.to_json() for p in self.selected], "k": self.k,
            "gold_ids": list(self.retrieval.gold_ids), "retrieval": dict(self.retrieval.metrics),
            "gold_rank": self.retrieval.candidate_rank, "gold_in_pool": list(self.retrieval.in_pool),
            "gold_selected": list(self.retrieval.selected),
            "scores": dict(self.scores),
            "failures": {m: {"reason": f.reason, "detail": f.detail} for m, f in self.failures.items()},
            "cost": {stage: c.as_dict() for stage, c in self.cost.items()}, "context_tokens": self.context_tokens,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuestionResult:
        selected = tuple(Passage.from_json(p) for p in data.get("selected", []))
        gold = tuple(data.get("gold_ids", []))
        traced = "gold_in_pool" in data
        trace = RetrievalTrace(
            gold_ids=gold, metrics=dict(data.get("retrieval", {})), candidate_rank=data.get("gold_rank"),
            in_pool=tuple(data.get("gold_in_pool", [])),
            selected=tuple(data["gold_selected"]) if "gold_selected" in data
            else tuple(sorted({p.doc_id for p in selected} & set(gold))),
            traced=traced,
        )
        return cls(
            id=str(data["id"]), question=data.get("question", ""), reference=data.get("reference"),
            answer=data.get("answer", ""), contexts=tuple(data.get("contexts", [])), selected=selected,
            retrieval=trace, scores=dict(data.get("scores", {})),
            failures={m: Failure(f.get("reason", "error"), f.get("detail", ""))
                      for m, f in data.get("failures", {}).items()},
            cost={stage: Cost.from_dict(c) for stage, c in data.get("cost", {}).items()},
            citations=tuple(data.get("citations", [])), generation_error=data.get("generation_error"),
            searched=tuple(data.get("searched", [])), query_fell_back=bool(data.get("query_fell_back", False)),
            refusal=bool(data.get("refusal", False)), context_tokens=data.get("context_tokens"),
        )


@dataclass(frozen=True)
class EvalResult:
    """One pipeline configuration scored over a list of questions."""

    metrics: Mapping[str, float | None]
    retrieval: Mapping[str, float]
    questions: tuple[QuestionResult, ...]
    cost: Cost
    cost_by_stage: Mapping[str, Cost]
    skipped: Mapping[str, str] = field(default_factory=dict)
    failures: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    models: Mapping[str, str] = field(default_factory=dict)
    #: where the judge's graded scores were read as supported when they were scored (judge/cut.py); None: no judge
    #: scored, or a record from before it was kept
    cut: float | None = None

    @classmethod
    def summarise(cls, questions: Sequence[QuestionResult], metrics: Sequence[str], skipped: Mapping[str, str],
                  cost: Cost, cost_by_stage: Mapping[str, Cost],
                  models: Mapping[str, str] | None = None, cut: float | None = None) -> EvalResult:
        """Means over the scored questions; every question that was not scored counted by reason."""
        from tuner.evaluation.retrieval_metrics import aggregate

        means: dict[str, float | None] = {}
        failures: dict[str, dict[str, int]] = {}
        for metric in metrics:
            values = [v for q in questions if (v := clean(q.scores.get(metric))) is not None]
            means[metric] = sum(values) / len(values) if values else None
            reasons = Counter(q.failures[metric].reason for q in questions if metric in q.failures)
            if reasons:
                failures[metric] = dict(reasons)
        generation_errors = sum(1 for q in questions if q.generation_error)
        if generation_errors:
            failures["generation"] = {"unparsable": generation_errors}
        fell_back = sum(q.query_fell_back for q in questions)
        if fell_back:  # searched as the question alone: counted, never lost
            failures["query"] = {"fallback": fell_back}
        retrieval = aggregate([q.retrieval.metrics for q in questions], [q.k for q in questions])
        return cls(means, retrieval, tuple(questions), cost, dict(cost_by_stage), dict(skipped), failures,
                   dict(models or {}), cut)

    def why_unscored(self, metric: str) -> str:
        """Why `metric` went unscored, as a line's end: "2 error, e.g. TypeError: …" (the first such question's
        words); "" when every question was scored."""
        failed = [q.failures[metric] for q in self.questions
                  if metric in q.failures and clean(q.scores.get(metric)) is None]
        if not failed:
            return ""
        counts = ", ".join(f"{n} {why}" for why, n in Counter(f.reason for f in failed).items())
        example = next((f.detail for f in failed if f.detail), "")
        return counts + (f", e.g. {first_line(example)}" if example.strip() else "")

    def value(self, metric: str) -> float | None:
        if metric in COST_METRICS:  # the mean over the questions whose cost is known
            known = [v for q in self.questions if (v := q.value(metric)) is not None]
            return float(sum(known) / len(known)) if known else None
        source = self.retrieval if metric in RETRIEVAL_METRICS else self.metrics
        return clean(source.get(metric))

    @property
    def refusals(self) -> int:
        return sum(q.refusal for q in self.questions)

    def scored(self, metric: str) -> int:
        """Questions with a value for `metric` (0s included: a refusal or empty judgement scored 0 counts)."""
        return sum(clean(q.scores.get(metric)) is not None for q in self.questions)

    @property
    def no_context(self) -> int:
        return sum(q.k == 0 for q in self.questions)

    def to_json(self) -> dict[str, Any]:
        return {
            "metrics": dict(self.metrics), "skipped": dict(self.skipped), "retrieval": dict(self.retrieval),
            "cost": self.cost.as_dict(), "cost_by_stage": {s: c.as_dict() for s, c in self.cost_by_stage.items()},
            "failures": {m: dict(r) for m, r in self.failures.items()}, "refusals": self.refusals,
            "no_context": self.no_context, "questions": len(self.questions), "models": dict(self.models),
            "per_question": [q.to_json() for q in self.questions],
            "cut": self.cut,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvalResult:
        return cls(
            metrics=dict(data.get("metrics", {})), retrieval=dict(data.get("retrieval", {})),
            questions=tuple(QuestionResult.from_json(q) for q in data.get("per_question", [])),
            cost=Cost.from_dict(data.get("cost", {})),
            cost_by_stage={s: Cost.from_dict(c) for s, c in data.get("cost_by_stage", {}).items()},
            skipped=dict(data.get("skipped", {})), failures=dict(data.get("failures", {})),
            models=dict(data.get("models", {})), cut=data.get("cut"),
        )


@dataclass(frozen=True)
class TrialFile:
    """What a study writes per trial: the configuration and its evaluation (complete or up to where it was pruned)."""

    number: int
    params: Mapping[str, Any]
    pipeline: Mapping[str, Any]
    pruned: bool
    result: EvalResult

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA_VERSION, "number": self.number, "params": dict(self.params),
                "pruned": self.pruned, "pipeline": dict(self.pipeline), **self.result.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "trial file") -> TrialFile:
        check_schema(data, SCHEMA_VERSION, source)
        try:
            return cls(int(data["number"]), dict(data.get("params", {})), dict(data.get("pipeline", {})),
                       bool(data.get("pruned", False)), EvalResult.from_json(data))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{source}: not a tuner trial file ({type(exc).__name__}: {exc})") from None


def eval_json(project: dict[str, Any], dataset: Any, chunks: int, split: str, results: dict[str, Any],
              seconds: float) -> dict[str, Any]:
    """What `tuner eval --out` writes: the config, the data it ran on, the results and the time taken."""
    return {"config": project,
            "dataset": {"name": dataset.name, "format": dataset.format, "source": str(dataset.source),
                        "documents": len(dataset.documents), "chunks": chunks, "questions": len(dataset.questions),
                        "split": split},
            **results, "seconds": round(seconds, 3)}
