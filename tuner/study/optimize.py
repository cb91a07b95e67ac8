"""The Optuna study that tunes the pipeline: one trial = one pipeline configuration scored by `RagRunner`.

Resumable by construction: results live in the study's storage and folder, every LLM call in its disk cache.
At start-up, trials stopped by Ctrl-C, and (in a journal, which one process owns) trials left RUNNING by a killed
process, are marked FAIL and their parameters re-enqueued, so the interrupted configuration runs again — its
completed LLM calls come back from the cache for free. Under --storage a RUNNING trial may be another worker's:
Optuna's heartbeat fails a dead worker's and retries it (`recover_interrupted`).
"""

from __future__ import annotations

import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import optuna

# private: the system-attribute prefix trial.set_constraint writes under. Closing a RUNNING trial from its file
# (`finish_from_file`) has a FrozenTrial, not a Trial, so it writes the same keys through the storage; if Optuna
# renames the key, recovered trials lose their guards (read as feasible). Pinned: optuna==5.0.0
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY as CONSTRAINTS_KEY
from optuna.trial import TrialState

from tuner.cache import redact, stable_hash
from tuner.config import SPEED_ONLY, ProjectConfig, TrialConfig
from tuner.cost import Cost
from tuner.data import Question
from tuner.data.split import Split
from tuner.errors import ConfigError, Outage, TunerError, interruption
from tuner.evaluation.records import Constraint, EvalResult, QuestionResult, TrialFile
from tuner.legacy import hashed_project
from tuner.metrics import RETRIEVAL_METRICS, SCORED_METRICS, TARGETS, lower_is_better
from tuner.study.attrs import (
    BASELINE,
    COST,
    DUPLICATE,
    ERROR,
    INTERRUPTED,
    PIPELINE,
    PROJECT,
    RECOVERED,
    RERUN_OF,
    RUNS,
    spent,
)
from tuner.study.meta import StudyMeta
from tuner.study.running import running, unwinding
from tuner.study.space import SearchSpace
from tuner.study.storage import HEARTBEAT, META_ATTR, StudyFolder, make_storage, stored_meta
from tuner.systems import Rejected

if TYPE_CHECKING:  # reading studies back (reports, analysis) must not pay for importing DSPy and RAGAS
    from tuner.evaluation.rag_eval import RagRunner

log = logging.getLogger(__name__)

DONE = (TrialState.COMPLETE, TrialState.PRUNED)
#: how long a trial waits for another running the same configuration to say whether it runs it
DECISION_SECONDS = 30.0
#: proposals in a row that repeat a tried configuration before the study stops: the sampler has nothing new left
REPEATS_TO_STOP = 25


#: the fewest paired questions with which a one-sided signed-rank test can reach p < 0.1 (1/2^4 = 0.0625; with 3
#: the smallest p is 1/8): an earlier --prune-after could never fire
PAIRED_MINIMUM = 4


@dataclass
class StudySettings:
    targets: list[str]
    constraints: list[Constraint] = field(default_factory=list)
    sampler: str = "tpe"
    seed: int | None = 0
    #: questions every trial answers before the pruner may stop it; None: 4 when a target needs the LLM, and no
    #: pruning when every target is a retrieval metric
    prune_after: int | None = None

    @property
    def patience(self) -> int:
        """Questions before the pruner may stop a trial: --prune-after (never below the test's 4), else 4: each
        answered question costs model calls, so prune early."""
        return max(self.prune_after or 0, PAIRED_MINIMUM)

    @property
    def prunes(self) -> bool:
        """Whether trials report each question's score to a pruner. Not by default when every target is a retrieval
        metric: such a question costs about a millisecond, and reporting it (a journal write, the best trial's
        scores compared) cost 3-4× more than the question (bench/throughput.py); on vaswani_npl the signed-rank
        test at 4-15 questions also stopped every stemmed trial of a study whose stemmed index gains +0.108
        nDCG@10 held-out. Optuna cannot prune multi-objective trials."""
        if self.multi_objective:
            return False
        return self.prune_after is not None or not all(t in RETRIEVAL_METRICS for t in self.targets)

    def __post_init__(self) -> None:
        for target in self.targets:
            if target not in TARGETS:
                raise ConfigError(f"--target {target!r}: choose from {', '.join(TARGETS)}")
        if len(set(self.targets)) != len(self.targets):
            raise ConfigError("--target: each metric at most once")
        if all(lower_is_better(t) for t in self.targets):
            raise ConfigError(f"--target {' '.join(self.targets)}: a cost alone is cheapest when nothing is retrieved "
                              f"or answered; give a quality target as well (--target faithfulness --target "
                              f"{self.targets[0]} for a Pareto front), or guard the cost with "
                              f"--constraint \"{self.targets[0]}<=…\"")
        if self.sampler not in ("tpe", "random", "grid"):
            raise ConfigError(f"--sampler {self.sampler!r}: choose tpe, random or grid")

    @property
    def multi_objective(self) -> bool:
        return len(self.targets) > 1

    def metrics_needed(self) -> list[str]:
        """The RAGAS metrics a trial must score: the targets and guards that are RAGAS metrics."""
        wanted = set(self.targets) | {c.metric for c in self.constraints}
        return [m for m in SCORED_METRICS if m in wanted]


def make_sampler(settings: StudySettings, space: SearchSpace, trials_so_far: int = 0) -> optuna.samplers.BaseSampler:
    # A resumed run seeded like the first would replay the first run's random draws, re-proposing
    # configurations the study already holds: offset the seed by the trials already there (still reproducible).
    seed = None if settings.seed is None else settings.seed + trials_so_far
    # guard metrics reach the samplers through trial.set_constraint (Optuna >= 5)
    if settings.sampler == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if settings.multi_objective:
        return optuna.samplers.NSGAIISampler(seed=seed)
    with warnings.catch_warnings():  # multivariate/group are "experimental" but long stable; they model `when:`
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=5, multivariate=True, group=True)


def make_pruner(settings: StudySettings) -> optuna.pruners.BasePruner:
    if not settings.prunes:
        return optuna.pruners.NopPruner()
    # Per-question scores, paired against the best trial's on the same questions: prune only when the
    # signed-rank test says this configuration is worse (p < 0.1) after `prune_after` questions.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.pruners.WilcoxonPruner(p_threshold=0.1, n_startup_steps=settings.patience)


def recover_interrupted(study: optuna.Study, running_too: bool = True,
                        finished: Callable[[optuna.trial.FrozenTrial], bool] | None = None) -> list[int]:
    """Queue again the parameters of trials stopped by Ctrl-C or an unreachable model, and (`running_too`: one
    process owns the study, as with the journal) of trials a killed process left RUNNING, failing them first; in a
    shared database those may be another worker's, and heartbeats retry the dead ones. Each once. A RUNNING trial
    that `finished` can close from its trial file (the process died, or the journal entry that finished it was
    damaged, after its result was written) is not run again."""
    trials = study.get_trials(deepcopy=False)
    rerun = {t.user_attrs[RERUN_OF] for t in trials if RERUN_OF in t.user_attrs}
    recovered = []
    for trial in trials:
        stopped = trial.state == TrialState.FAIL and INTERRUPTED in trial.user_attrs
        if not (stopped or running_too and trial.state == TrialState.RUNNING) or trial.number in rerun:
            continue
        if trial.state == TrialState.RUNNING and finished is not None and finished(trial):
            continue
        if trial.state == TrialState.RUNNING:
            # private (study._storage, trial._trial_id): Optuna's public API cannot end another process's trial;
            # if these move, recovery after a kill -9 fails here, in tests/test_faults_storage.py
            study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        # a RUNNING trial holds only the attrs it was enqueued with (the baseline mark): the re-run keeps them
        kept = {k: v for k, v in trial.user_attrs.items() if k == BASELINE}  # the baseline stays the baseline
        study.enqueue_trial(trial.params, user_attrs={**kept, RERUN_OF: trial.number}, skip_if_exists=False)
        recovered.append(trial.number)
    return recovered


@dataclass(frozen=True)
class TrialStarted:
    """A trial begins to evaluate its configuration (a repeat of a tried one never does)."""
    number: int
    params: Mapping[str, Any]


@dataclass(frozen=True)
class QuestionMoved:
    """Work on the trial's question `index` moved on to `stage` ("done" when it is finished)."""
    index: int
    stage: str


@dataclass(frozen=True)
class TrialDone:
    """A trial that ran finished (complete, pruned, failed or stopped): Optuna's record, and tuner's trial file
    (None when it wrote none: a trial stopped in its evaluation, whose `spent` says what it had paid)."""
    trial: optuna.trial.FrozenTrial
    file: TrialFile | None
    spent: Cost | None = None

    @property
    def cost(self) -> Cost:
        return self.file.result.cost if self.file is not None else self.spent or Cost()


StudyEvent = TrialStarted | QuestionMoved | TrialDone
#: what a display or a tracker listens with
StudyHook = Callable[[StudyEvent], None]


class UnscoredTrial(TunerError):
    """A trial that ran but could score no question on a target: failed, and the study goes on."""


class Objective:
    def __init__(self, runner: RagRunner, space: SearchSpace, base: TrialConfig, settings: StudySettings,
                 folder: StudyFolder, questions: list[Question], hook: StudyHook | None = None):
        self.runner = runner
        self.space = space
        self.base = base
        self.settings = settings
        self.folder = folder
        self.questions = questions  # the search questions: held-out ones are for the verdict alone
        self.hook = hook or (lambda event: None)
        self.written: dict[int, TrialFile] = {}  # the trial file each trial of this run wrote
        self.repeats = 0  # proposals in a row that repeated a tried configuration
        self._evaluating: tuple[int, float] | None = None  # (trial number, its evaluation's start)
        # what else decides a trial's result (models, data, evaluation): a resume with another --config may change
        # it, and then a configuration tried before is not a repeat
        self.project = project_hash(runner.workspace.config)

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        # the whole trial, not just its evaluation: a Ctrl-C while the sampler proposes or the result is recorded
        # (most of a fast retrieval trial) must also leave it marked interrupted, or Optuna stores a plain FAIL
        # that no resume runs again
        # a Ctrl-C stuck in native code still marks it interrupted, with what it paid (study/running.py)
        with running(trial, lambda: self._spent(trial)):
            try:
                return self._trial(trial)
            except (KeyboardInterrupt, Outage) as exc:  # not the configuration's fault: a resume runs it again
                if (paid := self._spent(trial)) is not None:
                    trial.set_user_attr(COST, paid)  # its typed reader: attrs.spent
                unwinding(trial, interruption(exc) if isinstance(exc, KeyboardInterrupt) else str(exc))
                raise

    def _spent(self, trial: optuna.Trial) -> dict[str, Any] | None:
        """What a trial stopped in its evaluation had paid (kept as its cost attribute: it has no trial file), so
        the report counts the calls and seconds; its re-run reads those calls from the cache. None before it
        evaluates."""
        if self._evaluating is None or self._evaluating[0] != trial.number:
            return None
        paid = self.runner.meter.total()
        paid.seconds = time.perf_counter() - self._evaluating[1]
        return paid.as_dict()

    def _trial(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        params = self.space.suggest(trial)
        config = self.base.with_params(params)
        # what this trial runs, visible at once to workers sharing the study: they never run it beside it
        trial.set_user_attr(PIPELINE, config.model_dump())
        trial.set_user_attr(PROJECT, self.project)
        tried = tried_before(trial.study, config, self.project, trial.number)
        if tried is not None:  # the same answers and scores again: spend no trial of the budget on it
            self.repeats += 1
            trial.set_user_attr(DUPLICATE, tried)
            raise optuna.TrialPruned(f"the configuration of trial {tried}")
        trial.set_user_attr(RUNS, True)  # decided: an earlier trial of this configuration on another worker yields
        self.repeats = 0
        self.hook(TrialStarted(trial.number, params))
        target = self.settings.targets[0]
        pruned = False

        def report(index: int, question: QuestionResult) -> None:
            nonlocal pruned
            if not self.settings.prunes:
                return
            value = question.value(target)
            if value is not None:
                trial.report(value, step=index)
            with warnings.catch_warnings():  # unscored questions are never reported, so step sets may differ
                warnings.filterwarnings("ignore", "WilcoxonPruner finds steps", UserWarning)
                prune = index + 1 < len(self.questions) and trial.should_prune()
            if prune:
                pruned = True
                raise optuna.TrialPruned(f"worse than the best trial after {index + 1} questions")

        started = time.perf_counter()
        self._evaluating = (trial.number, started)
        partial: list[QuestionResult] = []
        metrics = self.settings.metrics_needed()
        answer = bool(metrics)  # a study of retrieval metrics alone generates no answer
        try:
            result = self.runner.evaluate(
                config, self.questions, metrics=metrics,
                on_progress=lambda i, qid, stage: self.hook(QuestionMoved(i, stage)),
                on_question=lambda i, q: (partial.append(q), report(i, q)), answer=answer,
            )
        except Rejected as exc:  # the user's system refuses these knobs: no question of them can be answered
            trial.set_user_attr(ERROR, str(exc))
            raise UnscoredTrial(f"trial {trial.number}: {exc}") from None
        except optuna.TrialPruned:
            scored, skipped = self.runner.metrics_for(metrics) if answer else ([], {})
            result = self.runner.summarise(partial, scored, skipped, config, time.perf_counter() - started, answer)
            self._record(trial, config, result, pruned=True)
            raise
        self._record(trial, config, result, pruned=pruned)
        values, reason = target_values(result, self.settings)
        if reason:
            trial.set_user_attr(ERROR, reason)
            raise UnscoredTrial(f"trial {trial.number}: {reason}")
        return values[0] if len(values) == 1 else tuple(values)

    def _record(self, trial: optuna.Trial, config: TrialConfig, result: EvalResult, pruned: bool) -> None:
        """The trial file is the result's one record; Optuna gets the constraint violations its samplers read."""
        min_scored = self.runner.workspace.config.evaluation.min_scored
        for name, violation in guards(result, self.settings, min_scored).items():
            trial.set_constraint(name, violation)
        file = TrialFile(trial.number, trial.params, config.model_dump(), pruned, result)
        self.folder.write_trial(file)
        self.written[trial.number] = file


def target_values(result: EvalResult, settings: StudySettings) -> tuple[list[float | None], str | None]:
    """The trial's value per target, and why it failed when a target could not be scored on any question."""
    values = [result.value(t) for t in settings.targets]
    missing = [t for t, v in zip(settings.targets, values) if v is None]
    if not missing:
        return values, None
    causes = "; ".join(f"{t}: {why}" for t in missing if (why := result.why_unscored(t)))
    return values, f"no question could be scored on {', '.join(missing)}" + (f" ({causes})" if causes else "")


def project_hash(project: ProjectConfig) -> str:
    """What else decides a trial's result besides its pipeline (models, data, evaluation)."""
    dumped = project.model_dump(mode="json", exclude={"pipeline", "cache_dir"})
    if project.system is not None:
        dumped["system"] = project.system.model_dump(mode="json", exclude_defaults=True)
    return stable_hash(hashed_project(dumped, SPEED_ONLY))


def guards(result: EvalResult, settings: StudySettings, min_scored: float) -> dict[str, float]:
    """A finished trial's constraint violations (feasible at <= 0), by name: Optuna's samplers read them."""
    judged = [t for t in settings.targets if t in result.metrics]
    # a configuration must not win on the few questions it got scored on: too few is a violated guard
    violations = {str(c): c.violation(result.value(c.metric)) for c in settings.constraints}
    asked = max(1, len(result.questions))
    violations.update({f"{t} scored on >= {min_scored:.0%}": min_scored - result.scored(t) / asked for t in judged})
    return violations


def finish_from_file(study: optuna.Study, folder: StudyFolder, settings: StudySettings, project: ProjectConfig,
                     trial: optuna.trial.FrozenTrial) -> bool:
    """Close a RUNNING trial whose trial file holds its finished result, as the objective would have: the result is
    not paid for again. False when there is no such file (or it is another trial's draw)."""
    record = folder.read_trial(trial.number)
    if record is None or (trial.params and record.params != trial.params):
        return False
    # private (study._storage, trial._trial_id): a trial a dead process left RUNNING is closed through the storage,
    # as Optuna's own heartbeat failing does; if these move, the tests of recovery from a trial file fail
    storage, trial_id = study._storage, trial._trial_id
    for name, violation in guards(record.result, settings, project.evaluation.min_scored).items():
        storage.set_trial_system_attr(trial_id, f"{CONSTRAINTS_KEY}:{name}", float(violation))
    storage.set_trial_user_attr(trial_id, RECOVERED, True)
    values, reason = target_values(record.result, settings)
    if record.pruned:
        storage.set_trial_state_values(trial_id, TrialState.PRUNED)
    elif reason:
        storage.set_trial_user_attr(trial_id, ERROR, reason)
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
    else:
        storage.set_trial_state_values(trial_id, TrialState.COMPLETE, values)
    return True


def run_study(study: optuna.Study, objective: Objective, trials: int, timeout: float | None) -> int:
    """Run until the study holds `trials` finished trials (or the timeout, or until the sampler proposes only
    configurations already tried); returns how many counted trials ran now. A repeated configuration is recorded
    as a duplicate of the trial that ran it and does not count."""
    before, started = counted(study), time.monotonic()
    # the baseline may lie outside the space on purpose; the CLI says so once, Optuna would on every resume
    warnings.filterwarnings("ignore", message="Fixed parameter .* is out of range", category=UserWarning)

    def after_trial(s: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if DUPLICATE not in trial.user_attrs:
            objective.hook(TrialDone(trial, objective.written.get(trial.number), spent(trial.user_attrs)))
        # workers sharing the study stop together: it counts everyone's trials (one in flight elsewhere may finish)
        if objective.repeats >= REPEATS_TO_STOP or counted(s) >= trials:
            s.stop()

    remaining = trials - counted(study)
    while remaining > 0 and objective.repeats < REPEATS_TO_STOP:
        left = None if timeout is None else timeout - (time.monotonic() - started)
        if left is not None and left <= 0:
            break
        ran = len(study.trials)
        study.optimize(objective, n_trials=remaining, timeout=left, catch=(UnscoredTrial,), gc_after_trial=False,
                       callbacks=[after_trial])
        # only repeats are given back: a failed trial used its place, as in Optuna (else a study whose every
        # trial fails would never end)
        given_back = sum(DUPLICATE in t.user_attrs for t in study.get_trials(deepcopy=False)[ran:])
        remaining = min(given_back, trials - counted(study))  # workers sharing the study may have filled it
    if objective.repeats >= REPEATS_TO_STOP:
        tried = sum(DUPLICATE not in t.user_attrs and t.state.is_finished() for t in study.get_trials(deepcopy=False))
        finished = counted(study)
        failed = f" ({finished} finished, {tried - finished} failed)" if tried > finished else ""
        log.warning(f"stopped at {tried} distinct configurations{failed}: the sampler proposed only configurations "
                    f"already tried, {REPEATS_TO_STOP} times in a row (the search space looks exhausted)")
    return counted(study) - before


def counted(study: optuna.Study) -> int:
    """Finished trials that count towards --trials: complete or pruned, not repeating an earlier configuration."""
    return sum(DUPLICATE not in t.user_attrs for t in study.get_trials(deepcopy=False, states=DONE))


def same_pipeline(stored: Any, config: TrialConfig, dumped: dict[str, Any] | None = None) -> bool:
    """`dumped`: config.model_dump(), when the caller compares many. A record with today's knobs compares as is;
    only one from before a knob existed (or in an older shape) is read as a record (which gives it the knob's
    default; one with a value this version no longer takes is not this configuration)."""
    dumped = dumped if dumped is not None else config.model_dump()
    if isinstance(stored, dict) and stored.keys() == dumped.keys():
        return same_values(stored, dumped)
    return type(config).from_record(stored) == config


def same_values(a: Any, b: Any) -> bool:
    """`a == b`, except that NaN equals NaN: a knob value of NaN is one configuration, however often drawn."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(same_values, a, b))
    return a == b


def tried_before(study: optuna.Study, config: TrialConfig, project: str, number: int) -> int | None:
    """The duplicate-trial protocol. Guarantees: a configuration runs once per project identity, whichever worker
    draws it; a RUNNING trial is owned by the worker that created it (the only one that writes its attributes),
    until its heartbeat lapses and Optuna fails it, or a journal study's next start fails it (one process owns a
    journal); the attributes it relies on (PIPELINE, PROJECT, RUNS, DUPLICATE) are written before the trial
    evaluates, and Optuna's storage makes each visible to every worker once written.

    The trial that already ran this pipeline configuration with the same project, if any: a finished one, one
    that failed for its knobs, or one running on another worker. Of two running at once, the earlier (lower
    number) runs it, unless the later one had looked before the earlier one said what it runs and so decided to run
    it: every trial says what it runs before looking, so the later one's look saw the earlier one unless that
    happened, and the earlier one waits for the later one's decision to find out. Compared as validated configs:
    one stored before a knob existed has its default."""
    dumped = config.model_dump()
    for trial in study.get_trials(deepcopy=False, states=(*DONE, TrialState.RUNNING, TrialState.FAIL)):
        if trial.state == TrialState.FAIL and not failed_by_configuration(trial):
            continue
        if trial.number == number or trial.user_attrs.get(PROJECT) != project or DUPLICATE in trial.user_attrs or \
                not same_pipeline(trial.user_attrs.get(PIPELINE), config, dumped):
            continue
        if trial.state != TrialState.RUNNING or trial.number < number or decided_to_run(study, trial, DECISION_SECONDS):
            return trial.number
    return None


def failed_by_configuration(trial: optuna.trial.FrozenTrial) -> bool:
    """A trial that ran and failed for its knobs (the system refused them, no question could be scored): the same
    again would fail the same way, so it is a repeat. A stopped or crashed one is not: a resume runs it again."""
    return ERROR in trial.user_attrs and INTERRUPTED not in trial.user_attrs


def decided_to_run(study: optuna.Study, trial: optuna.trial.FrozenTrial, patience: float) -> bool:
    """Whether a trial that is looking for repeats of its configuration decides to run it (it says so at once, or
    marks itself a duplicate); a worker that died before deciding decided nothing."""
    deadline = time.monotonic() + patience
    while True:
        attrs = trial.user_attrs
        if RUNS in attrs or DUPLICATE in attrs or trial.state != TrialState.RUNNING or time.monotonic() > deadline:
            return RUNS in attrs and DUPLICATE not in attrs
        time.sleep(0.1)
        # private (study._storage, trial._trial_id): one trial read again, not the whole study, while waiting for
        # another worker's decision; if these move, tests/test_workers.py fails here
        trial = study._storage.get_trial(trial._trial_id)


def open_study(folder: StudyFolder, settings: StudySettings, space: SearchSpace, project: dict[str, Any],
               space_file: str, split: Split, data: dict[str, Any] | None = None, programs: list[str] = (),
               cache: str = "shared", heartbeat: int = HEARTBEAT) -> optuna.Study:
    """Create the study, or load it to resume. A resume keeps what the trials so far were measured by: other
    targets, constraints or a different search space are refused. The settings live in study.json (a study kept in
    a database: its records) and, as a copy that outlives it, in the storage's study attributes. `cache`: "shared"
    (the project's cache_dir), "own" (the study folder's) or "storage" (the study's database)."""

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for handler in logging.getLogger("optuna").handlers:  # a handler's filter sees its child loggers' records
        handler.addFilter(_said_in_one_line)
    storage = make_storage(folder, heartbeat)
    meta = folder.read_meta() or stored_meta(storage, folder.name)
    if meta:
        refuse_changes(folder.name, meta, settings, space)
    study = optuna.create_study(study_name=folder.name, storage=storage, load_if_exists=True,
                                directions=["minimize" if lower_is_better(t) else "maximize" for t in settings.targets],
                                pruner=make_pruner(settings))
    # workers sharing a study draw their own proposals: one seed everywhere would have them propose the same ones
    worker = os.getpid() if folder.storage else 0
    study.sampler = make_sampler(settings, space, trials_so_far=len(study.trials) + worker)
    updated = meta.with_project(project, data) if meta else StudyMeta(
        tuple(settings.targets), tuple(str(c) for c in settings.constraints), tuple(settings.metrics_needed()),
        settings.sampler, settings.seed, space_file, space.model_dump(mode="json", exclude_defaults=True),
        redact(folder.storage) if folder.storage else None, project, split, tuple(programs), cache, data)
    if updated != folder.read_meta():
        folder.write_meta(updated)
    if study.user_attrs.get(META_ATTR) != updated.to_json():
        study.set_user_attr(META_ATTR, updated.to_json())
    return study


def _said_in_one_line(record) -> bool:
    """Optuna logs a failed trial with its traceback, then "failed with value None". The error itself reaches the
    caller (the CLI says it in one line, a defect's traceback kept in a file) unless it is an unscored trial, which
    the trial table shows."""
    return not record.exc_info and "failed with value None" not in record.msg


def refuse_changes(name: str, meta: StudyMeta, settings: StudySettings, space: SearchSpace) -> None:
    """A resume measuring by other rules would mix incomparable trials under one best."""
    again = "resume with the same settings (or leave them out: the study's own are used), or choose another --study"
    if list(meta.targets) != settings.targets:
        raise ConfigError(f"study {name} optimises {', '.join(meta.targets)}; {again}")
    constraints = tuple(str(c) for c in settings.constraints)
    if meta.constraints != constraints:
        had = ", ".join(meta.constraints) or "no constraint"
        raise ConfigError(f"study {name} ran with {had}, not {', '.join(constraints) or 'none'}; {again}")
    if meta.space is not None and meta.space != space.model_dump(mode="json", exclude_defaults=True):
        raise ConfigError(f"study {name} searched another space ({meta.search_space or '?'} as it was when the "
                          f"study began); {again}")


def enqueue_baseline(study: optuna.Study, space: SearchSpace, base: TrialConfig) -> None:
    """Trial 0 is the project's own pipeline (a later round's: the previous best), so every study has its
    reference point."""
    study.enqueue_trial(space.drawn_from(base.knobs()), user_attrs={BASELINE: True}, skip_if_exists=True)
