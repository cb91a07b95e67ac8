"""One pipeline configuration, end to end: retrieve -> answer (DSPy) -> judge (RAGAS), question by question.

`RagRunner` holds what survives across configurations (the workspace, the loaded models, the disk cache, the
cost meter), so a study builds it once and calls `evaluate` per trial.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dspy

from tuner.cache import open_store
from tuner.config import PipelineConfig, ProjectConfig
from tuner.cost import CostMeter
from tuner.data import Question
from tuner.errors import ConfigError, TunerError, described
from tuner.evaluation.in_order import in_order
from tuner.evaluation.ragas_judge import Outcome, RagasScorer
from tuner.evaluation.records import EvalResult, Failure, Passage, QuestionResult, RetrievalTrace
from tuner.evaluation.retrieval_eval import passage, trace, trace_ids
from tuner.metrics import REGISTRY, SCORED_METRICS
from tuner.models.llms import CachedLLM, LLMError, estimate_tokens
from tuner.models.provider import ModelProvider, Models
from tuner.prompts.lm import dspy_lm
from tuner.prompts.programs import RAGAnswer, is_refusal, load_program, program_id
from tuner.systems import AskedSystem, BadReply, make_system
from tuner.workspace import Workspace

log = logging.getLogger(__name__)

#: called as (question index, question id, stage) whenever work on a question moves on
ProgressHook = Callable[[int, str, str], None]


@dataclass(frozen=True)
class Response:
    """What answered one question, before it is judged: tuner's pipeline or the user's own system."""

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


class RagRunner:
    """Models load on first use: a study that scores retrieval alone (no RAGAS metric, no LLM reranker) never
    loads one. The generator is a trial's (its `generator` knob); the judge is the project's, whatever a trial
    answers with. The runner has its own meter, and its own pipeline over the workspace's indexes whose LLM work
    that meter counts. With the project's own `system:`, the system answers each question in place of the
    pipeline and the program; everything after (the judge, refusals, records, the study) is the same."""

    def __init__(self, workspace: Workspace, use_cache: bool = True, models: Models | None = None,
                 program_files: Mapping[str, Path] | None = None):
        """`models`: language models handed in instead of the workspace's (tests hand in fakes); `program_files`:
        where this machine reads a compiled program a configuration names by another path."""
        self.program_files = dict(program_files or {})
        self.workspace = workspace
        self.meter = CostMeter()
        self.cache = open_store(workspace.cache, "llm_calls") if use_cache else None
        provider = workspace.models if models is None else ModelProvider(workspace.config, models)
        self.models = provider.metered(self.cache, self.meter)
        self.pipeline = workspace.pipeline_with(self.models)
        self._programs: dict[str, RAGAnswer] = {}
        self._lms: dict[str | None, dspy.LM] = {}
        self._per_thread = threading.local()
        self._told_alignment = False  # an alignment for another judge is said once, not per thread
        own = workspace.config.system
        #: the user's system (its entry point imported now: a bad one is one line before any trial); None: tuner's
        self.system = None if own is None else AskedSystem(
            own, make_system(own), open_store(workspace.cache, "system_calls") if use_cache else None, self.meter)

    def require_generator(self, why: str) -> None:
        """One line now if the generator cannot answer (a GGUF missing, an endpoint down or hung), before work that
        needs it only later; `why`: what needs it."""
        unreachable = self.generator.unreachable()  # building it names a missing model file
        if unreachable:
            raise LLMError(f"{unreachable} ({why})")

    def require_endpoints(self) -> None:
        """One line before the first question if an endpoint the run answers or judges with is down or hung (each
        call to a hung one would wait `timeout` four times over, in silence); in-process models are not loaded
        for it."""
        project = self.workspace.config
        if self.system is not None and (unreachable := self.system.unreachable()):
            raise LLMError(unreachable)
        for role, config in (("generator", project.generator), ("judge", project.judge_llm)):
            if role == "generator" and self.system is not None:
                continue
            if config.backend == "openai-compatible" and (unreachable := getattr(self, role).unreachable()):
                raise LLMError(f"{unreachable} (the {role})")

    def generator_for(self, config: PipelineConfig | None = None) -> CachedLLM:
        """The model `config` answers and rewrites queries with (None: the project's generator), loaded on first
        use; its calls are cached under its own name."""
        return self.models.generator(None if config is None else config.generator)

    @property
    def generator(self) -> CachedLLM:
        """The project's generator."""
        return self.models.generator()

    @property
    def judge(self) -> CachedLLM:
        return self.models.judge

    def lm_for(self, config: PipelineConfig | None = None) -> dspy.LM:
        """`config`'s generator as the DSPy LM its answer program runs on."""
        name = None if config is None else config.generator
        if name not in self._lms:
            self._lms[name] = dspy_lm(self.generator_for(config), self.workspace.config.answer_tokens)
        return self._lms[name]

    @property
    def lm(self) -> dspy.LM:
        return self.lm_for(None)

    @property
    def scorer(self) -> RagasScorer:
        """This thread's scorer: a scorer keeps the state of the sample it judges, and questions evaluated at once
        each judge their own."""
        scorer = getattr(self._per_thread, "scorer", None)
        if scorer is None:
            config = self.workspace.config
            aligned = config.evaluation.alignment
            if aligned is not None and not aligned.fits(self.judge.name) and not self._told_alignment:
                self._told_alignment = True
                log.warning(f"evaluation.alignment was aligned for the judge {aligned.judge}, not {self.judge.name}: "
                            f"its wording and demonstrations are shown, its cut is not used (another model's scale "
                            f"differs); run `tuner judge align` with this judge")
            scorer = self._per_thread.scorer = RagasScorer(self.judge, self.workspace.embedder, config.evaluation,
                                                           config.judge_tokens)
        return scorer

    def in_flight(self, config: PipelineConfig, judged: bool = True) -> int:
        """Questions evaluated at once: as many as both models allow (an endpoint's `concurrency`; llama.cpp in
        process answers one call at a time, and models handed in by a caller are not known to take more). The
        user's system answers as many as its `concurrency` says; with no judged metric, the judge holds nothing
        back."""
        widths = concurrency(self.workspace.config, config.generator)
        if self.system is not None and not judged:
            return widths["system"]
        if self.models.provider.given is not None:
            return 1
        return min(widths.values())

    def program(self, spec: str) -> RAGAnswer:
        if spec not in self._programs:
            self._programs[spec] = load_program(str(self.program_files.get(spec, spec)),
                                                self.workspace.config.answer_layout)
        return self._programs[spec]

    def metrics_for(self, requested: Sequence[str] | None) -> tuple[list[str], dict[str, str]]:
        """The metrics this dataset can score, and a note for each one skipped."""
        requested = list(self.workspace.config.evaluation.metrics if requested is None else requested)
        unknown = [m for m in requested if m not in SCORED_METRICS]
        if unknown:
            raise ConfigError(f"unknown metric {unknown[0]!r}: choose from {', '.join(SCORED_METRICS)}")
        skipped = {}
        if not self.workspace.dataset.has_references:
            for metric in requested:
                if "reference" in REGISTRY[metric].needs:
                    skipped[metric] = "needs reference answers; this dataset has none"
        return [m for m in requested if m not in skipped], skipped

    def evaluate(self, config: PipelineConfig, questions: Sequence[Question] | None = None,
                 metrics: Sequence[str] | None = None, on_progress: ProgressHook | None = None,
                 on_question: Callable[[int, QuestionResult], None] | None = None,
                 answer: bool = True) -> EvalResult:
        """Score `config` on the questions in order (default: all). `answer=False` scores retrieval alone: no
        answer is generated and no RAGAS metric scored. `on_question(index, result)` sees each finished
        question and may raise to stop early (a study prunes this way); the exception propagates."""
        questions = list(self.workspace.dataset.questions if questions is None else questions)
        scored, skipped = self.metrics_for(metrics) if answer else ([], {})
        program = self.program(config.program) if answer and self.system is None else None
        started = time.perf_counter()
        self.meter.records.clear()  # each evaluation reports its own cost
        if self.system is None:
            self.index_for(config)
            with self.meter.stage("", "retrieve"):
                self.pipeline.prefetch([q.text for q in questions], config)
        self.meter.stopping = False
        # an answer to look at for a refusal: the program's, or a system's that answers
        answered = answer and (self.system is None or self.system.config.answers)
        try:
            per_question = in_order(lambda index, question: self._one(index, question, config, program, scored,
                                                                      on_progress, answered),
                                    questions, self.in_flight(config, bool(scored)), on_question)
        except KeyboardInterrupt:  # questions in flight finish their calls (cached as they arrive), begin none
            self.meter.stopping = True
            raise
        return self.summarise(per_question, scored, skipped, config, time.perf_counter() - started, answer)

    def index_for(self, config: PipelineConfig) -> None:
        """Build the index `config` retrieves from if no earlier evaluation did: its seconds (and any LLM call)
        are this evaluation's `index` cost."""
        indexes = self.pipeline.indexes
        before = len(indexes.built)
        with self.meter.stage("", "index"):
            self.pipeline.index_for(config)
        if len(indexes.built) == before:
            self.meter.records.pop(("", "index"))

    def summarise(self, per_question: Sequence[QuestionResult], scored: Sequence[str], skipped: dict[str, str],
                  config: PipelineConfig, seconds: float, answered: bool = True) -> EvalResult:
        """The evaluation so far (a pruned trial summarises the questions it reached). Its models are the ones
        this configuration used: they identify what produced the scores."""
        cost = self.meter.total()
        cost.seconds = seconds
        models = {}
        if self.system is not None:
            models = {"system": self.system.name}
        elif answered:
            models = {"generator": self.generator_for(config).name, "program": config.program,
                      "program_id": program_id(self.program(config.program))}
        if scored or config.reranker == "llm":
            models["judge"] = self.judge.name
            if self.judge.why_read_off_text:  # graded verdicts that are the judge's sampled yes/no: reports say so
                models["verdicts"] = f"sampled yes/no (1 or 0): the judge {self.judge.why_read_off_text}"
        return EvalResult.summarise(per_question, scored, skipped, cost, self.meter.by_stage(), models)

    def _one(self, index: int, question: Question, config: PipelineConfig, program: RAGAnswer | None,
             metrics: list[str], on_progress: ProgressHook | None, answered: bool = True) -> QuestionResult:
        def step(stage: str) -> None:
            if on_progress:
                on_progress(index, question.id, stage)

        if self.system is not None:
            response = self._ask_system(question, config, step)
        else:
            response = self._run_pipeline(question, config, program, step)
        # an unanswerable question's reference is a refusal, no fact a context could recall or contain
        reference = None if question.kind == "unanswerable" else question.reference
        outcomes: dict[str, Outcome] = {}
        for metric in metrics:
            if response.failed is not None:
                outcomes[metric] = Outcome(None, "system", response.failed)
                continue
            step(metric)
            with self.meter.stage(question.id, metric):
                outcomes[metric] = self.scorer.score(metric, question.text, response.answer, response.contexts,
                                                     reference)
        refusal = answered and response.failed is None and is_refusal(response.answer)
        if refusal:
            # a generated unanswerable question: declining is the right answer, the judge's word stands
            answerable = question.kind != "unanswerable" and response.gold_reached
            outcomes = score_refusal(outcomes, self.workspace.config.evaluation.refusal, answerable)
        step("done")
        return QuestionResult(
            id=question.id,
            question=question.text,
            reference=question.reference,
            answer=response.answer,
            contexts=tuple(response.contexts),
            selected=response.selected,
            retrieval=response.retrieval,
            scores={m: o.value for m, o in outcomes.items()},
            failures={m: Failure(o.failure, o.detail) for m, o in outcomes.items() if o.failure},
            cost=self.meter.by_stage(question.id),
            citations=tuple(sorted({int(n) for n in re.findall(r"\[(\d+)\]", response.answer)})),
            generation_error=response.generation_error,
            refusal=refusal,
            searched=response.searched,
            query_fell_back=response.query_fell_back,
            context_tokens=response.context_tokens,
        )

    def _run_pipeline(self, question: Question, config: PipelineConfig, program: RAGAnswer | None,
                      step: Callable[[str], None]) -> Response:
        """tuner's own: query rewrite, retrieval, the answer program."""
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
        answer, generation_error = "", None
        if program is not None:
            step("generate")
            with self.meter.stage(question.id, "generate"):
                answer, generation_error = self._answer(program, question.text, contexts, config)
        gold = question.relevant_ids
        return Response(
            answer=answer,
            contexts=contexts,
            selected=tuple(passage(c) for c in retrieval.selected),
            retrieval=trace(retrieval, gold, config.top_k),
            gold_reached=not gold or any(set(c.chunk.doc_ids) & set(gold) for c in retrieval.selected),
            generation_error=generation_error,
            searched=tuple(dict.fromkeys(s.dense for s in rewritten.searches if s.dense != question.text))
            if rewritten else (),
            query_fell_back=bool(rewritten and rewritten.fell_back),
            # the generator's own count when it answered; a retrieval-only study loads no model to count with
            context_tokens=sum(map(self.generator_for(config).count_tokens if program is not None else estimate_tokens,
                                   contexts)),
        )

    def _ask_system(self, question: Question, config: PipelineConfig, step: Callable[[str], None]) -> Response:
        """The user's system answers; a reply it could not give fails this question alone, said in one line."""
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

    def _answer(self, program: RAGAnswer, question: str, contexts: list[str],
                config: PipelineConfig) -> tuple[str, str | None]:
        """The program's answer; a model that cannot follow the output format yields no answer, not a crash."""
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


def concurrency(project: ProjectConfig, generator: str | None = None) -> dict[str, int]:
    """Calls each model takes at once, by role (`generator`: the generator knob's value, None: the project's); the
    user's own system answers in the generator's place."""
    if project.system is not None:
        return {"system": project.system.concurrency, "judge": getattr(project.judge_llm, "concurrency", 1)}
    return {"generator": getattr(project.generator_named(generator), "concurrency", 1),
            "judge": getattr(project.judge_llm, "concurrency", 1)}


def held_back(project: ProjectConfig, generator: str | None = None) -> str | None:
    """A note when one model's `concurrency` is held back by the other's: questions go no faster than the slower
    model takes calls (an in-process llama.cpp judge answers one at a time)."""
    widths = concurrency(project, generator)
    (slow, fewer), (fast, more) = sorted(widths.items(), key=lambda item: item[1])
    if fewer == more:
        return None
    config = project.judge_llm if slow == "judge" else project.system or project.generator_named(generator)
    how = "in process, one call at a time" if getattr(config, "backend", "") == "llama-cpp" else \
        f"concurrency {fewer}"
    named = config.entry if slow == "system" else config.model
    return (f"the {fast} takes {more} calls at once, but the {slow} ({named}) answers {how}: questions are "
            f"evaluated {fewer} at a time (give the {slow} an endpoint with concurrency {more} to go faster)")


def score_refusal(outcomes: dict[str, Outcome], rule: str, answerable: bool) -> dict[str, Outcome]:
    """A refusal is not an answer to judge: a judge may even call "the contexts do not say" faithful, and a refusal
    left unscored lets a program win by declining the hard questions. Under the rule it scores each answer metric's
    worst value, 0 for a share ("zero"; "zero_if_answerable" when a gold context was selected, else the judge's word
    stands: declining was right) or is left out of the mean ("exclude"); it is always recorded as a refusal."""
    if rule == "zero_if_answerable" and not answerable:
        return outcomes

    def refused(metric: str) -> Outcome:
        worst = None if rule == "exclude" else REGISTRY[metric].worst  # 0 for a share; a metric's own worst
        why = ("declined to answer: left out by evaluation.refusal" if rule == "exclude" else
               f"declined to answer{' although a gold context was selected' if rule != 'zero' else ''}: "
               + ("left out, as the metric has no worst value" if worst is None else f"{worst:g}")
               + " by evaluation.refusal")
        return Outcome(worst, "refusal", why)

    return {m: refused(m) if REGISTRY[m].answer_metric else o for m, o in outcomes.items()}


def root_tuner_error(exc: BaseException) -> TunerError | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TunerError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
