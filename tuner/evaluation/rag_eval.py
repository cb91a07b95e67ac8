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
from pathlib import Path

from tuner.cache import KeyValue, open_store
from tuner.config import ProjectConfig, TrialConfig
from tuner.cost import CostMeter
from tuner.data import Question
from tuner.errors import ConfigError, Outage
from tuner.evaluation.answerer import Answerer, RunParts, Width
from tuner.evaluation.answerers import PipelineAnswerer, answerer_kind
from tuner.evaluation.in_order import in_order
from tuner.evaluation.judge.cut import judge_cut, setting_name
from tuner.evaluation.ragas_judge import Outcome, RagasScorer
from tuner.evaluation.records import EvalResult, Failure, QuestionResult
from tuner.metrics import REGISTRY, SCORED_METRICS
from tuner.models.llms import CachedLLM, LLMError
from tuner.models.provider import ModelProvider, Models
from tuner.prompts.programs import is_refusal
from tuner.workspace import Workspace

log = logging.getLogger(__name__)

#: called as (question index, question id, stage) whenever work on a question moves on
ProgressHook = Callable[[int, str, str], None]


class RagRunner:
    """Models load on first use: a study that scores retrieval alone (no RAGAS metric, no LLM reranker) never
    loads one. The generator is a trial's (its `generator` knob); the judge is the project's, whatever a trial
    answers with. The runner has its own meter, and its own pipeline over the workspace's indexes whose LLM work
    that meter counts. With the project's own `system:`, the system answers each question in place of the
    pipeline and the program; everything after (the judge, refusals, records, the study) is the same."""

    def __init__(self, workspace: Workspace, use_cache: bool = True, models: Models | None = None,
                 program_files: Mapping[str, Path] | None = None, prepared: object | None = None):
        """`models`: language models handed in instead of the workspace's (tests hand in fakes); `program_files`:
        where this machine reads a compiled program a configuration names by another path; `prepared`: what its
        answerer kind's `prepared` made for this project already (a study's)."""
        self.workspace = workspace
        self.meter = CostMeter()
        def store(name: str) -> KeyValue | None:
            return open_store(workspace.cache, name) if use_cache else None

        self.cache = store("llm_calls")
        provider = workspace.models if models is None else ModelProvider(workspace.config, models)
        self.models = provider.metered(self.cache, self.meter)
        self.pipeline = workspace.pipeline_with(self.models)
        self._per_thread = threading.local()
        self._told_alignment = False  # an alignment for another judge is said once, not per thread
        project = workspace.config
        #: what answers each question: tuner's pipeline, or the user's system (imported now: a bad entry point is
        #: one line before any trial)
        self.answerer: Answerer = answerer_kind(project).for_run(RunParts(
            project, self.meter, self.pipeline, self.models, store, program_files or {}, prepared))

    @property
    def built_in(self) -> PipelineAnswerer:
        """tuner's own pipeline and answer program, for work on them (compile, questions written from the index)."""
        if not isinstance(self.answerer, PipelineAnswerer):
            raise ConfigError(f"{self.answerer.what(self.workspace.config)} answers this project, not tuner's "
                              f"pipeline")
        return self.answerer

    def require_generator(self, why: str) -> None:
        """One line now if the generator cannot answer (a GGUF missing, an endpoint down or hung), before work that
        needs it only later; `why`: what needs it."""
        unreachable = self.generator.unreachable()  # building it names a missing model file
        if unreachable:
            raise LLMError(f"{unreachable} ({why})")

    def require_endpoints(self, answer: bool = True) -> None:
        """One line before the first question if what answers, or the judge its answers go to, is down or hung (each
        call to a hung endpoint would wait `timeout` four times over, in silence); in-process models are not loaded
        for it. `answer=False`: retrieval alone, no answer to write or judge."""
        if unreachable := self.answerer.unreachable(answer):
            raise Outage(unreachable)  # an endpoint down, or the user's system
        if answer and self.workspace.config.judge_llm.backend == "openai-compatible" and (
                down := self.judge.unreachable()):
            raise LLMError(f"{down} (the judge)")

    @property
    def generator(self) -> CachedLLM:
        """The project's generator."""
        return self.models.generator()

    @property
    def judge(self) -> CachedLLM:
        return self.models.judge

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

    def in_flight(self, config: TrialConfig, judged: bool = True) -> int:
        """Questions evaluated at once: as many as both models allow (an endpoint's `concurrency`; llama.cpp in
        process answers one call at a time, and models handed in by a caller are not known to take more). The
        user's system answers as many as its `concurrency` says; with no judged metric, the judge holds nothing
        back."""
        widths = concurrency(self.workspace.config, config)
        if not judged and not self.answerer.judge_retrieves(config):
            widths.pop("judge")
        if self.models.provider.given is not None:  # models handed in are not known to take more than one
            widths = {role: 1 if role in ("generator", "judge") else calls for role, calls in widths.items()}
        return min(widths.values())

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

    def evaluate(self, config: TrialConfig, questions: Sequence[Question] | None = None,
                 metrics: Sequence[str] | None = None, on_progress: ProgressHook | None = None,
                 on_question: Callable[[int, QuestionResult], None] | None = None,
                 answer: bool = True) -> EvalResult:
        """Score `config` on the questions in order (default: all). `answer=False` scores retrieval alone: no
        answer is generated and no RAGAS metric scored. `on_question(index, result)` sees each finished
        question and may raise to stop early (a study prunes this way); the exception propagates."""
        questions = list(self.workspace.dataset.questions if questions is None else questions)
        scored, skipped = self.metrics_for(metrics) if answer else ([], {})
        started = time.perf_counter()
        self.meter.records.clear()  # each evaluation reports its own cost
        self.answerer.prepare(config, questions, answer)
        self.meter.stopping = False
        try:
            per_question = in_order(lambda index, question: self._one(index, question, config, answer, scored,
                                                                      on_progress),
                                    questions, self.in_flight(config, bool(scored)), on_question)
        except KeyboardInterrupt:  # questions in flight finish their calls (cached as they arrive), begin none
            self.meter.stopping = True
            raise
        return self.summarise(per_question, scored, skipped, config, time.perf_counter() - started, answer)

    def summarise(self, per_question: Sequence[QuestionResult], scored: Sequence[str], skipped: dict[str, str],
                  config: TrialConfig, seconds: float, answered: bool = True) -> EvalResult:
        """The evaluation so far (a pruned trial summarises the questions it reached). Its models are the ones
        this configuration used: they identify what produced the scores."""
        cost = self.meter.total()
        cost.seconds = seconds
        models = self.answerer.models(config, answered)
        cut = None
        if scored or self.answerer.judge_retrieves(config):
            models["judge"] = self.judge.name
            if self.judge.why_read_off_text:  # graded verdicts that are the judge's sampled yes/no: reports say so
                models["verdicts"] = f"sampled yes/no (1 or 0): the judge {self.judge.why_read_off_text}"
            evaluation = self.workspace.config.evaluation
            if evaluation.checker is not None:  # the supported claims are the checker's verdicts, not the judge's
                models["checker"] = evaluation.checker.identity
            cut = judge_cut(evaluation, self.judge.name, setting_name(evaluation, self.judge.why_read_off_text)).value
        return EvalResult.summarise(per_question, scored, skipped, cost, self.meter.by_stage(), models, cut)

    def _one(self, index: int, question: Question, config: TrialConfig, answer: bool, metrics: list[str],
             on_progress: ProgressHook | None) -> QuestionResult:
        def step(stage: str) -> None:
            if on_progress:
                on_progress(index, question.id, stage)

        response = self.answerer.respond(question, config, step, answer)
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
        # an answer to look at for a refusal: the program's, or a system's that answers
        refusal = self.answerer.writes_answers(answer) and response.failed is None and is_refusal(response.answer)
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

def widths(project: ProjectConfig, config: TrialConfig | None = None) -> dict[str, Width]:
    """Calls each part of a run takes at once, by role (`generator`: the generator knob's value, None: the
    project's): what answers, and the judge."""
    return {**answerer_kind(project).widths(project, config), "judge": Width.of_model(project.judge_llm)}


def concurrency(project: ProjectConfig, config: TrialConfig | None = None) -> dict[str, int]:
    return {role: width.calls for role, width in widths(project, config).items()}


def held_back(project: ProjectConfig, config: TrialConfig | None = None) -> str | None:
    """A note when one part's `concurrency` is held back by the other's: questions go no faster than the slower
    takes calls (an in-process llama.cpp judge answers one at a time)."""
    (slow, fewer), (fast, more) = sorted(widths(project, config).items(), key=lambda item: item[1].calls)
    if fewer.calls == more.calls:
        return None
    how = "in process, one call at a time" if fewer.in_process else f"concurrency {fewer.calls}"
    return (f"the {fast} takes {more.calls} calls at once, but the {slow} ({fewer.named}) answers {how}: questions "
            f"are evaluated {fewer.calls} at a time (give the {slow} an endpoint with concurrency {more.calls} to go "
            f"faster)")


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
