"""The contract of what answers a question before it is judged (`Answerer`), and what it gives (`Response`). Its kinds:
tuner's built-in pipeline and answer program (`evaluation/answerers.py` `PipelineAnswerer`) and the user's own system
(`evaluation/system_answerer.py` `SystemAnswerer`); `answerers.answerer_kind` says which one a project tunes. A
run (`RagRunner`) holds one and judges whatever `Response` it gives the same way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from tuner.cache import KeyValue
from tuner.config import LLMConfig, PipelineConfig, ProjectConfig, SystemTrial, TrialConfig
from tuner.cost import CostMeter
from tuner.data import Question
from tuner.errors import ConfigError
from tuner.evaluation.records import Passage, RetrievalTrace

if TYPE_CHECKING:  # the model stack loads when tuner's pipeline answers, not to refuse a command
    from tuner.models.provider import Models
    from tuner.pipeline.run import RetrievalPipeline

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


@dataclass(frozen=True)
class RunParts:
    """What a run hands the answerer it makes: each kind takes the parts it answers with."""

    project: ProjectConfig
    meter: CostMeter
    #: the run's pipeline over the workspace's indexes, and its metered models
    pipeline: RetrievalPipeline
    models: Models
    #: a store of the run's cache by name (None: the run caches nothing)
    store: Callable[[str], KeyValue | None]
    #: where this machine reads a compiled program a configuration names by another path
    program_files: Mapping[str, Path] = field(default_factory=dict)
    #: what the answerer kind's `prepared` made for this project already (a study's); None: made now
    prepared: object | None = None


class Answerer(ABC):
    """One way of answering: it prepares for a configuration's questions, answers each, says which models produced
    the answers (they identify the scores), how many questions it takes at once, and whether it can be reached."""

    #: what a trial configures (a point of the search space)
    trial: ClassVar[type[PipelineConfig] | type[SystemTrial]]
    #: the commands that build or change tuner's own pipeline and make no sense for this answerer, each with why
    refused: ClassVar[Mapping[str, str]] = {}

    @classmethod
    @abstractmethod
    def for_run(cls, parts: RunParts) -> Answerer:
        """The answerer a run answers with, from the parts the run hands it."""

    @classmethod
    def refusal(cls, project: ProjectConfig, command: str) -> None:
        """ConfigError in one line when `command` (index, compile, export) has nothing to work on here."""
        if command in cls.refused:
            raise ConfigError(cls.refused[command].format(what=cls.what(project)))

    @staticmethod
    @abstractmethod
    def what(project: ProjectConfig, versioned: bool = False) -> str:
        """What answers, in words (status lines, reports); `versioned`: as a study records it (a resume under
        another is refused)."""

    @staticmethod
    @abstractmethod
    def base(project: ProjectConfig) -> TrialConfig:
        """The project's own configuration, every knob spelled out: trial 0, and what a knob the space leaves out
        takes."""

    @classmethod
    def recorded(cls, stored: object) -> TrialConfig | None:
        """A trial's recorded configuration (a study's `pipeline` attribute or trial file); None when this version
        no longer takes it."""
        return cls.trial.from_record(stored)

    @staticmethod
    @abstractmethod
    def widths(project: ProjectConfig, config: TrialConfig | None) -> dict[str, Width]:
        """Calls each part that answers `config` (None: the project's own) takes at once, by role (the judge's
        beside them is the run's)."""

    def prepare(self, config: TrialConfig, questions: Sequence[Question], answer: bool) -> None:
        """Work done once for a configuration's questions before the first is answered (`answer=False`: they are
        retrieved only)."""

    @abstractmethod
    def respond(self, question: Question, config: TrialConfig, step: Step, answer: bool) -> Response:
        """`question` answered under `config` (`answer=False`: retrieved only)."""

    @abstractmethod
    def writes_answers(self, answer: bool) -> bool:
        """Whether its responses hold an answer to read (for a refusal) when `answer` is asked for."""

    @abstractmethod
    def models(self, config: TrialConfig, answered: bool) -> dict[str, str]:
        """What produced a configuration's answers, by role."""

    @abstractmethod
    def unreachable(self, answer: bool) -> str | None:
        """Why it cannot answer at all (an endpoint down), checked before the first question (`answer=False`: it
        retrieves only); None when it can."""

    def judge_retrieves(self, config: TrialConfig) -> bool:
        """Whether the judge is at work while `config` retrieves (tuner's LLM reranker): it then holds questions back
        and names the result's judge even when no judged metric is scored."""
        return False

    def check_first(self, question: Question, config: TrialConfig, id_targets: Sequence[str],
                    documents: frozenset[str]) -> None:
        """Before the first trial: ConfigError in one line when its answer to `question` cannot serve the study (a
        reply of a shape it cannot read; for an id target, contexts that name no document of `documents`, the
        corpus's ids and the qrels'), a warning when some of them name none."""

    @staticmethod
    def prepared(project: ProjectConfig) -> object | None:
        """What is made once for a project and handed to every run of it (a study checks it before any trial)."""
        return None

    @staticmethod
    def notes(project: ProjectConfig) -> list[str]:
        """What the user should know of how it answers before the trials, in words."""
        return []

    @staticmethod
    def cannot_score(project: ProjectConfig, metric: str) -> str | None:
        """Why `metric` cannot be scored on what this answerer gives, in words; None when it can."""
        return None

    @staticmethod
    def changed(recorded: ProjectConfig, project: ProjectConfig) -> str | None:
        """What makes `project` another search than the study `recorded` ran (both answered this way), in words
        after "study NAME"; None when it may resume."""
        return None


