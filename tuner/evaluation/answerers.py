"""The kinds of what answers: tuner's built-in pipeline and answer program (`PipelineAnswerer`, here) and the user's
own system (`evaluation/system_answerer.py` `SystemAnswerer`), behind the contract in `evaluation/answerer.py`;
`answerer_kind` says which one a project tunes. A new way of answering is a subclass of `Answerer` and a branch in
`answerer_kind`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.config import PipelineConfig, ProjectConfig
from tuner.cost import CostMeter
from tuner.data import Question
from tuner.errors import TunerError, described
from tuner.evaluation.answerer import Answerer, Response, RunParts, Step, Width
from tuner.evaluation.retrieval_eval import passage, trace
from tuner.evaluation.system_answerer import SystemAnswerer
from tuner.models.llms import CachedLLM, estimate_tokens
from tuner.models.provider import Models

if TYPE_CHECKING:  # the model stack (DSPy, the pipeline) loads when tuner's pipeline answers, not to refuse a command
    import dspy

    from tuner.pipeline.run import RetrievalPipeline
    from tuner.prompts.programs import RAGAnswer

log = logging.getLogger(__name__)


class PipelineAnswerer(Answerer):
    """tuner's own: query rewrite, retrieval over the workspace's indexes, the answer program (DSPy) on the
    configuration's generator."""

    def __init__(self, project: ProjectConfig, pipeline: RetrievalPipeline, models: Models, meter: CostMeter,
                 program_files: Mapping[str, Path]):
        self.project = project
        self.pipeline = pipeline
        self.metered = models
        self.meter = meter
        self.program_files = dict(program_files)
        self._programs: dict[str, RAGAnswer] = {}
        self._lms: dict[str | None, dspy.LM] = {}

    trial = PipelineConfig

    @classmethod
    def for_run(cls, parts: RunParts) -> PipelineAnswerer:
        return cls(parts.project, parts.pipeline, parts.models, parts.meter, parts.program_files)

    @staticmethod
    def what(project: ProjectConfig, versioned: bool = False) -> str:
        return "tuner's built-in pipeline"

    @staticmethod
    def base(project: ProjectConfig) -> PipelineConfig:
        """Its index knobs spelled out (the project's chunking and stemmer), its generator named."""
        return project.resolved()

    @staticmethod
    def widths(project: ProjectConfig, config: PipelineConfig | None) -> dict[str, Width]:
        return {"generator": Width.of_model(project.generator_named(config and config.generator))}

    def generator_for(self, config: PipelineConfig | None = None) -> CachedLLM:
        """The model `config` answers and rewrites queries with (None: the project's generator), loaded on first
        use; its calls are cached under its own name."""
        return self.metered.generator(None if config is None else config.generator)

    def lm_for(self, config: PipelineConfig | None = None) -> dspy.LM:
        """`config`'s generator as the DSPy LM its answer program runs on."""
        from tuner.prompts.lm import dspy_lm

        name = None if config is None else config.generator
        if name not in self._lms:
            self._lms[name] = dspy_lm(self.generator_for(config), self.project.answer_tokens)
        return self._lms[name]

    def program(self, spec: str) -> RAGAnswer:
        from tuner.prompts.programs import load_program

        if spec not in self._programs:
            self._programs[spec] = load_program(str(self.program_files.get(spec, spec)), self.project.answer_layout)
        return self._programs[spec]

    def index_for(self, config: PipelineConfig) -> None:
        """Build the index `config` retrieves from if no earlier evaluation did: its seconds (and any LLM call)
        are this evaluation's `index` cost."""
        indexes = self.pipeline.indexes
        before = len(indexes.built)
        with self.meter.stage("", "index"):
            self.pipeline.index_for(config)
        if len(indexes.built) == before:
            self.meter.records.pop(("", "index"))

    def prepare(self, config: PipelineConfig, questions: Sequence[Question], answer: bool) -> None:
        if answer:
            self.program(config.program)  # a program that does not load: one line before the first question
        self.index_for(config)
        with self.meter.stage("", "retrieve"):
            self.pipeline.prefetch([q.text for q in questions], config)

    def writes_answers(self, answer: bool) -> bool:
        return answer

    def judge_retrieves(self, config: PipelineConfig) -> bool:
        return config.reranker == "llm"

    def models(self, config: PipelineConfig, answered: bool) -> dict[str, str]:
        from tuner.prompts.programs import program_id

        if not answered:
            return {}
        return {"generator": self.generator_for(config).name, "program": config.program,
                "program_id": program_id(self.program(config.program))}

    def respond(self, question: Question, config: PipelineConfig, step: Step, answer: bool) -> Response:
        pipeline = self.pipeline
        rewritten = None
        if config.query != "none":
            step("query")
            with self.meter.stage(question.id, "query"):
                rewritten = pipeline.rewrite(question.text, config)
        step("retrieve")
        with self.meter.stage(question.id, "retrieve"):
            retrieval = pipeline.run(question.text, config, rewritten)
        contexts = [c.chunk.text for c in retrieval.selected]
        written, generation_error = "", None
        if answer:
            step("generate")
            with self.meter.stage(question.id, "generate"):
                written, generation_error = self._answer(self.program(config.program), question.text, contexts,
                                                         config)
        gold = question.relevant_ids
        return Response(
            answer=written,
            contexts=contexts,
            selected=tuple(passage(c) for c in retrieval.selected),
            retrieval=trace(retrieval, gold, config.top_k),
            gold_reached=not gold or any(set(c.chunk.doc_ids) & set(gold) for c in retrieval.selected),
            generation_error=generation_error,
            searched=tuple(dict.fromkeys(s.dense for s in rewritten.searches if s.dense != question.text))
            if rewritten else (),
            query_fell_back=bool(rewritten and rewritten.fell_back),
            # the generator's own count when it answered; a retrieval-only study loads no model to count with
            context_tokens=sum(map(self.generator_for(config).count_tokens if answer else estimate_tokens,
                                   contexts)),
        )

    def _answer(self, program: RAGAnswer, question: str, contexts: list[str],
                config: PipelineConfig) -> tuple[str, str | None]:
        """The program's answer; a model that cannot follow the output format yields no answer, not a crash."""
        import dspy

        try:
            with dspy.context(lm=self.lm_for(config)):
                return str(program(question=question, contexts=contexts).answer or ""), None
        except Exception as exc:
            cause = root_tuner_error(exc)
            if cause is not None:  # DSPy wraps our backend's errors: surface the one-line original
                raise cause from None
            if not isinstance(exc, (dspy.utils.exceptions.AdapterParseError, ValueError)):
                raise
            return "", described(exc)

    def unreachable(self, answer: bool) -> str | None:
        if not answer or self.project.generator.backend != "openai-compatible":
            return None  # an in-process model is not loaded to check it
        down = self.generator_for().unreachable()
        return down and f"{down} (the generator)"


def answerer_kind(project: ProjectConfig) -> type[Answerer]:
    """The kind of answerer `project` tunes."""
    return PipelineAnswerer if project.system is None else SystemAnswerer


def root_tuner_error(exc: BaseException) -> TunerError | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TunerError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None

