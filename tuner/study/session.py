"""Open-or-resume a study and run it: the one wiring that the CLI, agent rounds, benchmarks and tests share.

    session = Session.open(StudySpec("demo", StudySettings(["faithfulness"]), space_file))
    session.run(trials=40)

Opening resolves the project (a resumed study keeps the project it started with unless one is given), splits
the questions into search and held-out parts (a resumed study keeps its recorded split), fails the trials a
killed process left RUNNING and queues them again, and enqueues the baseline as trial 0. Trials see only the
search questions. Models load only when `run` needs them, so reading a study back costs nothing.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from pydantic import BaseModel

from tuner.cache import is_database
from tuner.compile.saved import Sidecar, compiled_programs, read_sidecar
from tuner.config import CHECKER_KINDS, INDEX_KNOBS, JudgeAlignment, ProjectConfig, TrialConfig, setting_at
from tuner.data import Dataset, Question, load_dataset
from tuner.data.split import Split
from tuner.errors import ConfigError
from tuner.evaluation.answerers import answerer_kind
from tuner.evaluation.rag_eval import RagRunner, held_back
from tuner.evaluation.records import unscorable
from tuner.metrics import RETRIEVAL_METRICS
from tuner.models.embedders import Embedder
from tuner.models.provider import Models
from tuner.study.meta import StudyMeta
from tuner.study.optimize import (
    Objective,
    StudyHook,
    StudySettings,
    counted,
    enqueue_baseline,
    finish_from_file,
    open_study,
    recover_interrupted,
    run_study,
)
from tuner.study.space import SearchSpace, load_space, resolve_space
from tuner.study.storage import HEARTBEAT, StudyFolder, study_folder

if TYPE_CHECKING:
    from tuner.pipeline.index import IndexProgress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StudySpec:
    name: str
    settings: StudySettings
    search_space: Path
    #: the project; None: a resumed study's own, else the defaults (the bundled demo)
    project: ProjectConfig | None = None
    dataset: Path | None = None
    limit: int | None = None
    storage: str | None = None
    studies_dir: Path = Path("studies")
    #: where LLM calls and embeddings are cached; None: the project's shared cache_dir (or the study's own
    #: folder with own_cache, or for a resumed study what it was created with). Rounds share round 1's.
    cache_dir: Path | None = None
    own_cache: bool = False
    #: knob values of trial 0 beyond the project's pipeline (a round starts from the previous round's best)
    baseline: Mapping[str, Any] = field(default_factory=dict)
    #: the share of questions held out for the verdict (None: a resumed study's recorded split, else 0.3 from 20
    #: questions on), or a Split to reuse (rounds keep round 1's)
    holdout: float | Split | None = None
    #: called with the session before a new study is created (`tuner optimize` checks the judge here); it may
    #: raise to refuse, and then no study is left behind
    before_first_trial: Callable[[Session], None] | None = None
    #: folders whose compiled programs (`tuner compile`) a new study offers as `program` choices, beside
    #: studies/programs/ and its own programs/ (rounds add round 1's)
    programs_from: tuple[Path, ...] = ()
    #: seconds between heartbeats of a trial in an RDB storage (a worker silent for three is retried elsewhere)
    heartbeat: int = HEARTBEAT


@dataclass(frozen=True)
class Recorded:
    """A study's settings for what a command leaves out: a resume takes the study's own targets, constraints and
    search space (`tuner optimize --study NAME --trials 60` is a whole resume command)."""

    targets: list[str]
    constraints: list[str]
    search_space: Path
    resumed: bool

    @classmethod
    def or_given(cls, folder: StudyFolder, targets: Sequence[str] | None, constraints: Sequence[str] | None,
                 search_space: str | None) -> Recorded:
        meta = folder.read_meta()
        return cls(list(targets or (meta.targets if meta else ["faithfulness"])),
                   list(constraints if constraints is not None else (meta.constraints if meta else [])),
                   resolve_space(search_space or (meta and meta.search_space) or "default"), meta is not None)


@dataclass
class Session:
    spec: StudySpec
    folder: StudyFolder
    study: optuna.Study  # None only while `before_first_trial` runs
    space: SearchSpace
    project: ProjectConfig
    dataset: Dataset
    split: Split
    recovered: list[int]
    #: where LLM calls and embeddings are cached: a folder, or the study's database
    cache: Path | str
    #: a compiled program the space names -> where this machine reads it (a copy from the study's documents)
    program_files: dict[str, Path] = field(default_factory=dict)
    #: what answerer_kind(project).prepared made (the user's system, imported once)
    prepared: object | None = None
    _runner: RagRunner | None = None
    #: this session created the study (it had no record before)
    created: bool = False
    #: the study was refused before its first trial and nothing of it was kept (`discard_unstarted`)
    discarded: bool = False

    @classmethod
    def open(cls, spec: StudySpec) -> Session:
        folder = study_folder(spec.studies_dir, spec.name, spec.storage)
        meta = folder.read_meta()
        programs = offered_programs(meta, spec.studies_dir, folder, spec.programs_from)
        for program in [] if meta else programs:  # kept where every worker of a database study reads
            folder.keep_program(Path(program))
        program_files = folder.program_files(programs)
        project = spec.project
        if project is None:
            project = meta.config if meta else ProjectConfig()
        if meta:  # before the space, which names the knobs of the system the study tunes
            refuse_other_system(folder.name, meta.config, project)
        space = recorded_space(spec.search_space, meta, project).with_programs(programs)
        dataset = project.dataset
        if meta and spec.project is not None:  # resumed with --config: what the command leaves out is the study's
            recorded = meta.config.dataset
            dataset = dataset.model_copy(update={key: getattr(recorded, key) for key in ("path", "limit")
                                                 if key not in dataset.model_fields_set})
        if spec.dataset is not None:
            dataset = dataset.model_copy(update={"path": spec.dataset.resolve()})
        if spec.limit is not None:
            dataset = dataset.model_copy(update={"limit": spec.limit})
        if meta:  # a resume keeps the cache its calls were paid into
            cache, location = meta.cache, folder.cache_in_use(meta)
        elif spec.storage is not None:  # every worker, on any machine, shares the database's
            cache, location = "storage", spec.storage
        elif spec.cache_dir is not None:  # rounds: round 1's
            cache, location = "shared", spec.cache_dir
        else:
            cache = "own" if spec.own_cache else "shared"
            location = folder.cache if spec.own_cache else project.cache_dir
        project = project.model_copy(update={"dataset": dataset})
        if not is_database(location):  # a folder; a database URL stays out of the project (passwords)
            project = project.model_copy(update={"cache_dir": location.resolve()})
        data = load_dataset(project.dataset.path, project.dataset.format, project.dataset.limit)
        refuse_unscorable(spec.settings, data, project)
        identity = data.identity()  # a hash over every text: once
        if meta:
            refuse_other_measures(folder.name, meta, identity, project)
        holdout = spec.holdout if spec.holdout is not None else project.dataset.holdout
        split = study_split(meta, holdout, [q.id for q in data.questions], folder.name)
        # recorded in the project too, so `tuner best` writes a config whose `eval --split` finds the same split
        project = project.model_copy(update={"dataset": project.dataset.model_copy(update={"holdout": split.fraction})})
        # a space that cannot run is refused before the judge check, the study, or any trial; a resume's trial 0
        # ran (and a resume on another space is refused with that reason)
        space.check_for(project, str(spec.search_space), None if meta else dict(spec.baseline))
        if spec.settings.sampler == "grid":
            space.grid()  # too large a grid to run is refused here, not materialised by Optuna
        # made once, before any study: an entry point that does not import, or an unset token, is one line now
        prepared = answerer_kind(project).prepared(project)
        session = cls(spec, folder, None, space, project, data, split, [], location, program_files, prepared,
                      created=not meta)
        if not meta and spec.before_first_trial is not None:
            spec.before_first_trial(session)
        session.study = open_study(folder, spec.settings, space, project.model_dump(mode="json"),
                                   str(spec.search_space), split, identity, programs, cache, spec.heartbeat)
        if meta:  # as `tuner report` would, before a trial is paid for, not after
            refuse_newer_records(folder, session.study)
        session.recovered = recover_interrupted(
            session.study, running_too=spec.storage is None,
            finished=lambda trial: finish_from_file(session.study, folder, spec.settings, project, trial))
        enqueue_baseline(session.study, space, session.baseline)
        return session

    @property
    def finished(self) -> int:
        return counted(self.study)

    @property
    def base(self) -> TrialConfig:
        """What a knob outside the space, or one whose `when:` fails, takes: the project's own configuration."""
        return answerer_kind(self.project).base(self.project)

    @property
    def baseline(self) -> TrialConfig:
        """Trial 0: the base, or in a later round the previous round's best (whose knobs are all in the space)."""
        return self.base.with_params(self.spec.baseline)

    def notes(self) -> list[str]:
        """What the user should know before the trials: the data's notes, a baseline the space cannot draw, compiled
        programs trained on this study's search questions (they score optimistically there, not held out)."""
        notes = list(self.dataset.notes)
        outside = self.space.outside(self.baseline.knobs())
        if outside and not self.finished:
            notes.append(f"the baseline's {', '.join(outside)} lies outside the search space: it runs as trial 0, "
                         f"the reference point, but no later trial can draw it")
        writing = [f"{name} ({', '.join(v for v in map(str, param.choices or []) if v in facts.generator)}: "
                   f"{facts.generator_calls})" for name, param in self.generator_knobs().items()
                   for facts in [self.space.facts(name)]]
        if writing and not self.finished:
            notes.append(f"the space's {', '.join(writing)} call the generator ({self.project.generator.model}), "
                         f"in a retrieval-target study too; the calls are cached")
        slower = held_back(self.project)
        if slower and not self.finished:
            notes.append(slower)
        if not self.finished:
            notes += answerer_kind(self.project).notes(self.project)
        judge = self.project.judge_llm
        own = [v for v in (self.space.params["generator"].values() if "generator" in self.space.params else [])
               if self.project.generator_named(v) == judge]
        if own and not self.finished:
            notes.append(f"the judge is also the generator choice {own[0]}: it will judge its own answers beside the "
                         f"others' (self-preference favours them); a judge: of another model rules this out")
        search = {q.id for q in self.search_questions}
        for path in self.folder.read_meta().programs:
            seen = search & set((read_sidecar(Path(path)) or Sidecar()).train_ids)
            notes.append(f"program choice {path}" + (
                f": compiled on {len(seen)} of this study's {len(search)} search questions, so its trials score "
                f"optimistically there; the held-out verdict is not affected" if seen else ""))
        return notes

    def generator_knobs(self):
        """The space's knobs with a value that calls the generator (HyDE, contextual: llm, RAPTOR...)."""
        return {name: param for name, param in self.space.params.items() if param.type == "categorical"
                and set(map(str, param.choices or [])) & self.space.facts(name).generator}

    @property
    def search_questions(self) -> list[Question]:
        return self.split.search(self.dataset.questions)

    def runner(self, models: Models | None = None, embedder: Embedder | None = None, use_cache: bool = True,
               on_progress: IndexProgress | None = None) -> RagRunner:
        """The workspace and models, built on first use (tests pass fakes; benchmarks turn the cache off)."""
        if self._runner is None:
            from tuner.workspace import open_workspace

            workspace = open_workspace(self.project, embedder=embedder, dataset=self.dataset, cache=self.cache,
                                       on_progress=on_progress)
            index = workspace.index
            where = "the study's database" if is_database(self.cache) else self.cache
            if index is not None:
                log.info(f"index: {len(index.chunks)} chunks, {index.embedded} embedded now, "
                         f"{len(index.chunks) - index.embedded} from the cache ({where})")
            self._runner = RagRunner(workspace, use_cache, models, self.program_files, self.prepared)
        return self._runner

    def run(self, trials: int, timeout: float | None = None, hook: StudyHook | None = None) -> int:
        """Run until the study holds `trials` finished trials; returns how many ran now (repeats not counted)."""
        if self.finished >= trials:
            return 0  # nothing to run: load no model
        answer = bool(self.spec.settings.metrics_needed())
        try:
            self.runner().require_endpoints(answer)  # a hung endpoint is told now, not after minutes of silence
            self.check_first_reply()
            if not answer and self.generator_knobs():
                # a retrieval study meets the generator only when a trial draws such a value: check it now, not
                # hours in
                self.runner().require_generator(f"the space's {', '.join(self.generator_knobs())} write with it")
        except ConfigError:  # an outage keeps the study: its baseline waits for what answers to be back
            self.discard_unstarted()
            raise
        objective = Objective(self.runner(), self.space, self.base, self.spec.settings, self.folder,
                              self.search_questions, hook)
        return run_study(self.study, objective, trials, timeout)

    def discard_unstarted(self) -> None:
        """A study this session created, refused before its first trial began: nothing of it is kept, so the corrected
        command starts it anew (a kept one would be resumed under the settings that were refused) and no empty
        report stands beside it. A study in a database is left to its workers."""
        if not self.created or self.folder.storage is not None or any(
                t.state != optuna.trial.TrialState.WAITING for t in self.study.get_trials(deepcopy=False)):
            return
        shutil.rmtree(self.folder.root, ignore_errors=True)
        self.discarded = True

    def check_first_reply(self) -> None:
        """What answers is asked the first search question with the baseline's knobs before the first trial: a reply
        that cannot serve the study (its shape; for an id target, contexts that name no document) is one line now,
        not a failure in every trial."""
        if self.finished or not self.search_questions:
            return
        id_targets = [t for t in self.spec.settings.targets if t in RETRIEVAL_METRICS]
        documents = frozenset(d.id for d in self.dataset.documents).union(
            *(q.relevant_ids for q in self.dataset.questions))
        self.runner().answerer.check_first(self.search_questions[0], self.baseline, id_targets, documents)


#: project settings every trial of a study retrieved with: a resume with others would compare other indexes. The
#: index knobs' own settings (`INDEX_KNOBS`), and what else decides what an index returns
INDEX_SETTINGS = (*INDEX_KNOBS.values(), "chunking", "embedder.backend", "embedder.precision", "backend.type",
                  "backend.candidates", "backend.bm25", "graph")
#: how every trial of a study was judged: a resume judging otherwise would rank scores of two scales together
#: what decides a study's scores, the settings that decide others' defaults first (a checker, an alignment, a blend
#: or another wording leaves the passages joined where the default numbers them): a refused resume names the cause
JUDGE_SETTINGS = ("evaluation.verdicts", "evaluation.checker", "evaluation.alignment", "evaluation.blend",
                  "evaluation.verdict_prompt", "evaluation.statements", "evaluation.verdict_contexts")


def refuse_newer_records(folder: StudyFolder, study: optuna.Study) -> None:
    """A resumed study whose trial files a newer tuner wrote is refused now (`NewerRecord`, in one line), as every
    command that reads them refuses it, not after this tuner has run a trial into it."""
    for trial in study.get_trials(deepcopy=False):
        folder.read_trial(trial.number)
        folder.read_trial(trial.number, held_out=True)


def refuse_other_system(name: str, recorded: ProjectConfig, project: ProjectConfig) -> None:
    """A study's trials are answers of one system, code and data as its version says: a resume under another would
    rank two systems' scores together (and its cached replies would not be the new version's)."""
    def said(config: ProjectConfig) -> str:
        return answerer_kind(config).what(config, versioned=True)

    again = "resume with the study's own config, or choose another --study"
    if said(recorded) != said(project):
        raise ConfigError(f"study {name} tuned {said(recorded)}, not {said(project)}: its trials are that system's "
                          f"answers; {again}")
    if why := answerer_kind(project).changed(recorded, project):
        raise ConfigError(f"study {name} {why}; {again}")


def offered_programs(meta: StudyMeta | None, studies_dir: Path, folder: StudyFolder,
                     programs_from: Sequence[Path] = ()) -> list[str]:
    """The programs a study's program knob may name besides the built-in ones: a new study offers the compiled
    programs there are now; a resumed one the ones it was created with."""
    if meta:
        return list(meta.programs)
    return [str(p.resolve()) for d in (studies_dir / "programs", folder.root / "programs", *programs_from)
            for p in compiled_programs(d)]


def recorded_space(path: Path | str, meta: StudyMeta | None, project: ProjectConfig) -> SearchSpace:
    """The space a study searches (over the knobs of what `project` tunes): its file, or, where the file is not on this
    machine (a worker elsewhere, a round space written beside another machine's folder), the copy its study.json
    records."""
    if meta is not None and meta.space is not None and not Path(path).is_file():
        return SearchSpace.of(meta.space, project)
    return load_space(path, project)


def refuse_other_measures(name: str, meta: StudyMeta, data: Mapping[str, Any], project: ProjectConfig) -> None:
    """A resume must measure on the questions and the index the study's trials were measured on (another --limit
    would compare means over other question sets and leak held-out questions into the search)."""
    again = "resume with the study's own --dataset, --limit and --config (or leave them out), or choose another --study"
    recorded = meta.data
    if recorded is None:  # a study from before the data was recorded: its recorded limit at least
        recorded_limit = meta.project.get("dataset", {}).get("limit")
        if recorded_limit != project.dataset.limit:
            raise ConfigError(f"study {name} used --limit {recorded_limit}, not {project.dataset.limit}; {again}")
    elif recorded != data:
        said = "other questions or documents of the same counts" if (
            recorded.get("questions"), recorded.get("documents")) == (data["questions"], data["documents"]) else \
            f"{data['questions']} questions over {data['documents']} documents"
        raise ConfigError(f"study {name} was measured on {recorded.get('questions')} questions over "
                          f"{recorded.get('documents')} documents, this run has {said}; {again}")
    before = meta.config
    for settings, done, why in ((INDEX_SETTINGS, "indexed", "its trials retrieved from that index"),
                                (JUDGE_SETTINGS, "judged", "its trials' scores are that judge's"),
                                (("answer_layout",), "answered", "its trials' answers were written so")):
        for path in settings:
            for key in _leaves(setting_at(before, path), path):
                was, now = setting_at(before, key), setting_at(project, key)
                if was != now:
                    raise ConfigError(f"study {name} {done} with {key} = {was!r}, not {now!r}: {why}; {again}")


def _leaves(value: Any, path: str) -> list[str]:
    """The dotted paths of every setting at or under `path` (a section names each of its keys)."""
    if isinstance(value, BaseModel) and not isinstance(value, (JudgeAlignment, *CHECKER_KINDS)):  # each one setting
        return [leaf for key in type(value).model_fields for leaf in _leaves(getattr(value, key), f"{path}.{key}")]
    return [path]


def refuse_unscorable(settings: StudySettings, data: Dataset, project: ProjectConfig) -> None:
    """A target or guard the data (or the user's system) cannot score would fail every trial: refused before any is
    run."""
    for metric in dict.fromkeys([*settings.targets, *(c.metric for c in settings.constraints)]):
        if why := answerer_kind(project).cannot_score(project, metric):
            raise ConfigError(f"--target/--constraint {metric}: {why}")
        if (why := unscorable(metric, data)) is not None:
            raise ConfigError(f"--target/--constraint {metric}: {why}; choose another metric or dataset")


def study_split(meta: StudyMeta | None, holdout: float | Split | None, ids: list[str], name: str) -> Split:
    """The study's split: the recorded one when resuming (a different --holdout is refused), else a new one."""
    if isinstance(holdout, Split):
        return holdout
    if meta:
        recorded = meta.held_out
        if holdout is not None and holdout != recorded.fraction:
            raise ConfigError(f"study {name} holds out {recorded.fraction:g} of its questions; resume it without "
                              f"--holdout (or with --holdout {recorded.fraction:g}), or choose another --study name")
        return recorded
    return Split.auto(ids, holdout)
