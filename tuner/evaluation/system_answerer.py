"""The user's own system as what answers a study's questions (`SystemAnswerer`, an `evaluation.answerer.Answerer`):
asked through `AskedSystem` with a trial's knob values, each reply checked, cached and counted."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import ClassVar

from tuner.cache import KeyValue
from tuner.config import ProjectConfig, SystemTrial
from tuner.cost import CostMeter
from tuner.data import Question
from tuner.errors import ConfigError
from tuner.evaluation.answerer import Answerer, Response, RunParts, Step, Width
from tuner.evaluation.records import Passage, RetrievalTrace
from tuner.evaluation.retrieval_eval import trace_ids
from tuner.metrics import REGISTRY
from tuner.models.llms import estimate_tokens
from tuner.systems import AskedSystem, BadReply, BadShape, Rejected, System, make_system

log = logging.getLogger(__name__)


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
    trial = SystemTrial

    @classmethod
    def for_run(cls, parts: RunParts) -> SystemAnswerer:
        return cls(parts.project, parts.store("system_calls"), parts.meter, parts.prepared)

    def __init__(self, project: ProjectConfig, cache: KeyValue | None, meter: CostMeter, made: System | None = None):
        """`made`: the system as `prepared` made it (a study's); None: made now."""
        own = project.system
        self.system = AskedSystem(own, made or SystemAnswerer.prepared(project), cache, meter)
        self.meter = meter
        #: a reply of this evaluation was read: a bad shape after it is that question's alone
        self.read_one = False

    def prepare(self, config: SystemTrial, questions: Sequence[Question], answer: bool) -> None:
        self.read_one = False

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
    def what(project: ProjectConfig, versioned: bool = False) -> str:
        return f"system {project.system.identity if versioned else project.system.entry}"

    @staticmethod
    def changed(recorded: ProjectConfig, project: ProjectConfig) -> str | None:
        def knobs(config: ProjectConfig) -> str:
            return ", ".join(f"{n} ({k.type}, default {k.default!r})" for n, k in config.system.knobs.items()) or "none"

        if recorded.system.knobs != project.system.knobs:
            return (f"declared the knobs {knobs(recorded)}, not {knobs(project)}: a knob the space leaves out runs at "
                    f"its default in every trial")
        return None

    @staticmethod
    def base(project: ProjectConfig) -> SystemTrial:
        return project.system_trial()

    @staticmethod
    def widths(project: ProjectConfig, config: SystemTrial | None) -> dict[str, Width]:
        return {"system": Width(project.system.at_once, project.system.entry)}

    @staticmethod
    def notes(project: ProjectConfig) -> list[str]:
        own = project.system
        if own.at_once < own.concurrency:
            return [f"system {own.entry} is asked one question at a time, whatever its concurrency ({own.concurrency}) "
                    f"says: it does not say it is thread-safe (set system.thread_safe: true if calls share no state)"]
        return []

    def writes_answers(self, answer: bool) -> bool:
        return answer and self.system.config.answers

    def models(self, config: SystemTrial, answered: bool) -> dict[str, str]:
        return {"system": self.system.name}

    def respond(self, question: Question, config: SystemTrial, step: Step, answer: bool) -> Response:
        step("system")
        gold = question.relevant_ids
        with self.meter.stage(question.id, "system"):
            try:
                reply = self.system.reply(question.id, question.text, config.system)
            except BadShape as exc:
                if not self.read_one:  # every reply of this shape would fail: pay for no more of them
                    raise Rejected(f"question {question.id}: {exc}; a reply of this shape cannot be scored, so the "
                                   f"trial stops at its first question") from None
                log.warning(f"question {question.id}: {exc}")
                return Response("", [], (), RetrievalTrace(gold_ids=tuple(sorted(gold)), traced=False), not gold,
                                failed=str(exc))
            except BadReply as exc:
                log.warning(f"question {question.id}: {exc}")
                return Response("", [], (), RetrievalTrace(gold_ids=tuple(sorted(gold)), traced=False), not gold,
                                failed=str(exc))
        self.read_one = True
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

    def check_first(self, question: Question, config: SystemTrial, id_targets: Sequence[str],
                    documents: frozenset[str]) -> None:
        """Asked with the baseline's knobs (the reply is cached, so trial 0 pays nothing more). A call that raised
        or timed out is that question's failure in trial 0, unless an id target needs its ids now."""
        entry = self.system.config.entry
        try:
            reply = self.system.reply(question.id, question.text, config.system, keep_failure=True)
        except Rejected:  # the baseline's knobs are refused: trial 0 fails for them, and the study goes on
            return
        except BadReply as exc:
            if isinstance(exc, BadShape) or id_targets:
                raise ConfigError(f"system {entry}, asked question {question.id} before the first trial: {exc}"
                                  ) from None
            return
        if not id_targets:
            return
        target = id_targets[0]
        if not reply.contexts:  # nothing to read an id from: not the same fault as contexts without ids
            looked = f" ({reply.contexts_from})" if reply.contexts_from else ""
            raise ConfigError(f"--target {target}: system {entry} returned no contexts for question {question.id}"
                              f"{looked}, so its document ids cannot be checked before the first trial and id "
                              f"metrics would read nothing; return the passages it retrieved (`tuner system check` "
                              f"shows its reply)")
        if any(c.id is None for c in reply.contexts):
            raise ConfigError(f"--target {target}: the contexts system {entry} returned for question {question.id} "
                              f"carry no document id, so id metrics cannot be computed; return each context as "
                              f"{{\"text\": ..., \"id\": DOCUMENT_ID}} with the ids the qrels name, or choose a judged "
                              f"target")
        ids = [c.id for c in reply.contexts]
        foreign = [i for i in ids if i not in documents]
        if not foreign:
            return
        shown = ", ".join(repr(i) for i in foreign[:3]) + (", …" if len(foreign) > 3 else "")
        like = ", ".join(repr(i) for i in sorted(question.relevant_ids or documents)[:2])
        said = (f"{len(foreign)} of the {len(ids)} context ids system {entry} returned for question {question.id} "
                f"({shown}) name no document of the dataset (its ids look like {like})")
        if len(foreign) == len(ids):
            raise ConfigError(f"--target {target}: {said}, so every id metric would be 0; return each context's "
                              f"source document id (a LangChain Document's metadata key, a LlamaIndex node's "
                              f"ref_doc_id), or choose a judged target")
        log.warning(f"{said}: they count as never relevant; return each context's source document id")
