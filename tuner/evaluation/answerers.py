"""What answers a question before it is judged, behind one small contract: tuner's built-in pipeline and answer
program (`PipelineAnswerer`), or the user's own system (`SystemAnswerer`). A run (`RagRunner`) holds one and judges
whatever `Response` it gives the same way; a new way of answering is a subclass here and a branch in
`answerer_kind`."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from tuner.cache import KeyValue
from tuner.config import LLMConfig, PipelineConfig, ProjectConfig
from tuner.cost import CostMeter
from tuner.data import Question
from tuner.errors import ConfigError, TunerError, described
from tuner.evaluation.records import Passage, RetrievalTrace
from tuner.evaluation.retrieval_eval import passage, trace, trace_ids
from tuner.metrics import REGISTRY
from tuner.models.llms import CachedLLM, estimate_tokens
from tuner.models.provider import Models
from tuner.systems import AskedSystem, BadReply, System, make_system

if TYPE_CHECKING:  # the model stack (DSPy, the pipeline) loads when tuner's pipeline answers, not to refuse a command
    import dspy

    from tuner.pipeline.run import RetrievalPipeline
    from tuner.prompts.programs import RAGAnswer

log = logging.getLogger(__name__)

#: called with the stage a question's work moves on to
Step = Callable[[str], None]


@dataclass(frozen=True)
class Response:
    """What answered one question, before it is judged."""

    answer: str
    contexts: list[str]
    selected: tuple[Passage, ...]
    retrieval: RetrievalTrace
    #: a gold document was among the contexts (or the data names none): a refusal there is a miss
    gold_reached: bool
    generation_error: str | None = None
    #: the user's system failed on this question (the call raised, timed out or returned no reply)
    failed: str | None = None
    searched: tuple[str, ...] = ()
    query_fell_back: bool = False
    context_tokens: int | None = None


@dataclass(frozen=True)
class Width:
    """How many calls one part of a run takes at once, and what it is (for the note when it holds the rest back)."""

    calls: int
    named: str
    in_process: bool = False

    @classmethod
    def of_model(cls, config: LLMConfig) -> Width:
        """llama.cpp in process answers one call at a time; an endpoint as many as its `concurrency`."""
        return cls(getattr(config, "concurrency", 1), config.model, config.backend == "llama-cpp")


class Answerer(ABC):
    """One way of answering: it prepares for a configuration's questions, answers each, says which models produced
    the answers (they identify the scores), how many questions it takes at once, and whether it can be reached."""

    #: the commands that build or change tuner's own pipeline and make no sense for this answerer, each with why
    refused: ClassVar[Mapping[str, str]] = {}
    #: the judge may be at work while it retrieves (tuner's LLM reranker): it holds questions back even when no
    #: judged metric is scored
    judge_retrieves: ClassVar[bool] = True

    @classmethod
    def refusal(cls, project: ProjectConfig, command: str) -> None:
        """ConfigError in one line when `command` (index, compile, export) has nothing to work on here."""
        if command in cls.refused:
            raise ConfigError(cls.refused[command].format(what=cls.what(project)))

    @staticmethod
    @abstractmethod
    def what(project: ProjectConfig) -> str:
        """What answers, in words (status lines, reports)."""

    @staticmethod
    @abstractmethod
    def widths(project: ProjectConfig, generator: str | None) -> dict[str, Width]:
        """Calls each part that answers takes at once, by role (the judge's beside them is the run's)."""

    def prepare(self, config: PipelineConfig, questions: Sequence[Question], answer: bool) -> None:
        """Work done once for a configuration's questions before the first is answered (`answer=False`: they are
        retrieved only)."""

    @abstractmethod
    def respond(self, question: Question, config: PipelineConfig, step: Step, answer: bool) -> Response:
        """`question` answered under `config` (`answer=False`: retrieved only)."""

    @abstractmethod
    def writes_answers(self, answer: bool) -> bool:
        """Whether its responses hold an answer to read (for a refusal) when `answer` is asked for."""

    @abstractmethod
    def models(self, config: PipelineConfig, answered: bool) -> dict[str, str]:
        """What produced a configuration's answers, by role."""

    @abstractmethod
    def unreachable(self, answer: bool) -> str | None:
        """Why it cannot answer at all (an endpoint down), checked before the first question (`answer=False`: it
        retrieves only); None when it can."""

    def check_ids(self, question: Question, config: PipelineConfig, target: str) -> None:
        """Before the first trial of a study with an id target: ConfigError when its contexts name no document."""

    @staticmethod
    def prepared(project: ProjectConfig) -> object | None:
        """What is made once for a project and handed to every run of it (a study checks it before any trial)."""
        return None

    @staticmethod
    def cannot_score(project: ProjectConfig, metric: str) -> str | None:
        """Why `metric` cannot be scored on what this answerer gives, in words; None when it can."""
        return None


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

    @staticmethod
    def what(project: ProjectConfig) -> str:
        return "tuner's built-in pipeline"

    @staticmethod
    def widths(project: ProjectConfig, generator: str | None) -> dict[str, Width]:
        return {"generator": Width.of_model(project.generator_named(generator))}

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


class SystemAnswerer(Answerer):
    """The user's own system (`system:`): it retrieves and answers; each reply checked, cached and counted
    (`systems.AskedSystem`). A reply it could not give fails that question alone, said in one line."""

    refused: ClassVar[Mapping[str, str]] = {
        "index": "tuner index builds tuner's own index; {what} retrieves for itself",
        "compile": "tuner compile compiles tuner's own answer program; {what} answers with its own prompt: make the "
                   "prompt a knob of it (system.knobs) and search it",
        "export": "this study tuned {what}, not tuner's pipeline: its knobs are its own settings, with nothing to "
                  "export to Weaviate (`tuner best --study NAME -o best.yaml` writes their best values under "
                  "pipeline.system)",
    }
    judge_retrieves: ClassVar[bool] = False

    def __init__(self, project: ProjectConfig, cache: KeyValue | None, meter: CostMeter, made: System | None = None):
        """`made`: the system as `prepared` made it (a study's); None: made now."""
        own = project.system
        self.system = AskedSystem(own, made or SystemAnswerer.prepared(project), cache, meter)
        self.meter = meter

    @staticmethod
    def prepared(project: ProjectConfig) -> System:
        """The system, its entry point imported (or its token read) now: a bad one is one line before any trial."""
        return make_system(project.system)

    @staticmethod
    def cannot_score(project: ProjectConfig, metric: str) -> str | None:
        if not project.system.answers and metric in REGISTRY and REGISTRY[metric].answer_metric:
            return (f"system {project.system.entry} returns contexts only (answers: false), and {metric} judges an "
                    f"answer; choose a retrieval target")
        return None

    @staticmethod
    def what(project: ProjectConfig) -> str:
        return f"system {project.system.entry}"

    @staticmethod
    def widths(project: ProjectConfig, generator: str | None) -> dict[str, Width]:
        return {"system": Width(project.system.concurrency, project.system.entry)}

    def writes_answers(self, answer: bool) -> bool:
        return answer and self.system.config.answers

    def models(self, config: PipelineConfig, answered: bool) -> dict[str, str]:
        return {"system": self.system.name}

    def respond(self, question: Question, config: PipelineConfig, step: Step, answer: bool) -> Response:
        step("system")
        gold = question.relevant_ids
        with self.meter.stage(question.id, "system"):
            try:
                reply = self.system.reply(question.id, question.text, config.system)
            except BadReply as exc:
                log.warning(f"question {question.id}: {exc}")
                return Response("", [], (), RetrievalTrace(gold_ids=tuple(sorted(gold)), traced=False), not gold,
                                failed=str(exc))
        ids = [c.id for c in reply.contexts]
        contexts = [c.text for c in reply.contexts]
        return Response(
            answer=reply.answer or "",
            contexts=contexts,
            selected=tuple(Passage(chunk_id=c.id or f"#{n}", doc_id=c.id or "", score=0.0, confidence=None, hop=0,
                                   text=c.text) for n, c in enumerate(reply.contexts, 1)),
            retrieval=trace_ids(ids, gold),
            gold_reached=not gold or bool(set(ids) & set(gold)),
            context_tokens=sum(map(estimate_tokens, contexts)),
        )

    def unreachable(self, answer: bool) -> str | None:
        return self.system.unreachable()

    def check_ids(self, question: Question, config: PipelineConfig, target: str) -> None:
        """Asked with the baseline's knobs (the reply is cached, so trial 0 pays nothing more)."""
        entry = self.system.config.entry
        try:
            reply = self.system.reply(question.id, question.text, config.system)
        except BadReply as exc:
            raise ConfigError(f"system {entry}, asked question {question.id} before the first trial: {exc}") from None
        if not reply.contexts or any(c.id is None for c in reply.contexts):
            raise ConfigError(f"--target {target}: the contexts system {entry} returned for question {question.id} "
                              f"carry no document id, so id metrics cannot be computed; return each context as "
                              f"{{\"text\": ..., \"id\": DOCUMENT_ID}} with the ids the qrels name, or choose a judged "
                              f"target")


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

