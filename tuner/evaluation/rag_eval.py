"""One pipeline configuration, end to end: retrieve -> answer (DSPy) -> judge (RAGAS), question by question.

`RagRunner` holds what survives across configurations (the workspace, the loaded models, the disk cache, the
cost meter), so a study builds it once and calls `evaluate` per trial.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from tuner.cache import DiskCache
from tuner.config import ALL_METRICS, PipelineConfig
from tuner.data import Question
from tuner.errors import ConfigError, TunerError
from tuner.evaluation.cost import CostMeter
from tuner.evaluation.ragas_judge import REQUIREMENTS, Outcome, RagasScorer
from tuner.evaluation.retrieval_eval import describe
from tuner.evaluation.retrieval_metrics import aggregate, question_metrics
from tuner.models.llms import LLM, CachedLLM, make_llm
from tuner.prompts.lm import dspy_lm
from tuner.prompts.programs import RAGAnswer, load_program, program_id
from tuner.workspace import Workspace

#: called as (question index, question id, stage) whenever work on a question moves on
ProgressHook = Callable[[int, str, str], None]


@dataclass
class Models:
    generator: LLM
    judge: LLM


class RagRunner:
    def __init__(self, workspace: Workspace, use_cache: bool = True, models: Models | None = None):
        config = workspace.config
        self.workspace = workspace
        self.meter = CostMeter()
        self.cache = DiskCache(config.cache_dir / "llm_calls.sqlite") if use_cache else None
        if models is None:
            models = Models(make_llm(config.generator, config.cache_dir), make_llm(config.judge_llm, config.cache_dir))
        self.generator = CachedLLM(models.generator, self.cache, self.meter)
        self.judge = CachedLLM(models.judge, self.cache, self.meter)
        self.lm = dspy_lm(self.generator, config.answer_tokens)
        self.scorer = RagasScorer(self.judge, workspace.embedder, config.evaluation, config.judge_tokens)
        workspace.pipeline.attach_llm(self.judge, config.evaluation.llm_rerank_top_n)
        self._programs: dict[str, RAGAnswer] = {}

    def program(self, spec: str) -> RAGAnswer:
        if spec not in self._programs:
            self._programs[spec] = load_program(spec)
        return self._programs[spec]

    def metrics_for(self, requested: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
        """The metrics this dataset can score, and a note for each one skipped."""
        requested = list(self.workspace.config.evaluation.metrics if requested is None else requested)
        unknown = [m for m in requested if m not in ALL_METRICS]
        if unknown:
            raise ConfigError(f"unknown metric {unknown[0]!r}: choose from {', '.join(ALL_METRICS)}")
        skipped = {}
        if not self.workspace.dataset.has_references:
            for metric in requested:
                if "reference" in REQUIREMENTS[metric]:
                    skipped[metric] = "needs reference answers; this dataset has none"
        return [m for m in requested if m not in skipped], skipped

    def evaluate(self, config: PipelineConfig, questions: Sequence[Question] | None = None,
                 metrics: Sequence[str] | None = None, on_progress: ProgressHook | None = None,
                 on_question: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Score `config` on the questions in order. `on_question(index, result)` sees each finished question
        and may raise to stop early (a study prunes this way); the exception propagates."""
        questions = list(self.workspace.dataset.questions if questions is None else questions)
        scored, skipped = self.metrics_for(metrics)
        program = self.program(config.program)
        started = time.perf_counter()
        self.meter.records.clear()  # each evaluation reports its own cost
        per_question = []
        for index, question in enumerate(questions):
            per_question.append(self._one(index, question, config, program, scored, on_progress))
            if on_question:
                on_question(index, per_question[-1])
        seconds = time.perf_counter() - started
        result = summarise(per_question, scored, skipped, self.meter, seconds)
        result["models"] = {"generator": self.generator.name, "judge": self.judge.name,
                            "program": config.program, "program_id": program_id(program)}
        return result

    def _one(self, index: int, question: Question, config: PipelineConfig, program: RAGAnswer,
             metrics: list[str], on_progress: ProgressHook | None) -> dict[str, Any]:
        def step(stage: str) -> None:
            if on_progress:
                on_progress(index, question.id, stage)

        step("retrieve")
        with self.meter.stage(question.id, "retrieve"):
            retrieval = self.workspace.pipeline.run(question.text, config)
        contexts = [c.chunk.text for c in retrieval.selected]
        retrieval_scores = {}
        if question.relevant_ids:
            retrieval_scores = question_metrics([c.chunk.doc_id for c in retrieval.ranking],
                                                [c.chunk.doc_id for c in retrieval.selected],
                                                question.relevant_ids, config.top_k)
        step("generate")
        with self.meter.stage(question.id, "generate"):
            answer, generation_error = self._answer(program, question.text, contexts)
        outcomes: dict[str, Outcome] = {}
        for metric in metrics:
            step(metric)
            with self.meter.stage(question.id, metric):
                outcomes[metric] = self.scorer.score(metric, question.text, answer, contexts, question.reference)
        step("done")
        return {
            "id": question.id,
            "question": question.text,
            "reference": question.reference,
            "answer": answer,
            "citations": sorted({int(n) for n in re.findall(r"\[(\d+)\]", answer)}),
            "generation_error": generation_error,
            "contexts": contexts,
            "selected": [describe(c) for c in retrieval.selected],
            "k": len(retrieval.selected),
            "gold_ids": sorted(question.relevant_ids),
            "retrieval": retrieval_scores,
            "scores": {m: o.value for m, o in outcomes.items()},
            "failures": {m: {"reason": o.failure, "detail": o.detail} for m, o in outcomes.items() if o.failure},
            "cost": self.meter.by_stage(question.id),
        }

    def _answer(self, program: RAGAnswer, question: str, contexts: list[str]) -> tuple[str, str | None]:
        """The program's answer; a model that cannot follow the output format yields no answer, not a crash."""
        try:
            with dspy.context(lm=self.lm):
                return str(program(question=question, contexts=contexts).answer or ""), None
        except Exception as exc:
            cause = root_tuner_error(exc)
            if cause is not None:  # DSPy wraps our backend's errors: surface the one-line original
                raise cause from None
            if not isinstance(exc, (dspy.utils.exceptions.AdapterParseError, ValueError)):
                raise
            return "", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def root_tuner_error(exc: BaseException) -> TunerError | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TunerError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def summarise(per_question: list[dict[str, Any]], metrics: list[str], skipped: dict[str, str], meter: CostMeter,
              seconds: float) -> dict[str, Any]:
    means: dict[str, float | None] = {}
    failures: dict[str, dict[str, int]] = {}
    for metric in metrics:
        values = [q["scores"][metric] for q in per_question if q["scores"].get(metric) is not None]
        means[metric] = sum(values) / len(values) if values else None
        reasons = Counter(q["failures"][metric]["reason"] for q in per_question if metric in q["failures"])
        if reasons:
            failures[metric] = dict(reasons)
    generation_errors = sum(1 for q in per_question if q["generation_error"])
    if generation_errors:
        failures["generation"] = {"unparsable": generation_errors}
    total = meter.total()
    cost = total.as_dict()
    cost["seconds"] = round(seconds, 3)
    return {
        "metrics": means,
        "skipped": skipped,
        "retrieval": aggregate([q["retrieval"] for q in per_question], [q["k"] for q in per_question]),
        "cost": cost,
        "cost_by_stage": meter.by_stage(),
        "failures": failures,
        "questions": len(per_question),
        "per_question": per_question,
    }

