"""Reading studies back: typed trial records, best (feasible) trials, the best configuration as a config file,
listings. Reads storage and trial files only: no model is loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import TrialState

from tuner.cache import is_database
from tuner.config import ProjectConfig, absolute_paths
from tuner.cost import Cost
from tuner.data.split import Split
from tuner.errors import ConfigError, TunerError
from tuner.evaluation.labels import Label
from tuner.evaluation.records import Constraint, EvalResult, TrialFile
from tuner.legacy import legacy_constraints
from tuner.metrics import lower_is_better
from tuner.study.attrs import BASELINE, DUPLICATE, ERROR, INTERRUPTED, PIPELINE, RERUN_OF, spent
from tuner.study.meta import StudyMeta
from tuner.study.space import SearchSpace, load_space
from tuner.study.storage import StudyFolder, make_storage, no_such_study, study_folder


@dataclass(frozen=True)
class TrialRecord:
    """One trial as analysis and reports see it: Optuna's view (state, values) joined with its trial file."""

    number: int
    state: str  # complete | pruned | fail | interrupted | running | waiting
    params: Mapping[str, Any]
    values: tuple[float, ...] | None
    baseline: bool
    rerun_of: int | None
    feasible: bool
    started: datetime | None
    finished: datetime | None
    file: TrialFile | None
    #: the same configuration scored on the held-out questions by the verdict (None: not scored, or scored
    #: with another configuration or other models than this trial's, e.g. before a resume changed them)
    holdout: TrialFile | None = None
    #: what a trial stopped in its evaluation (Ctrl-C, an endpoint gone) had paid: it has no trial file
    spent: Cost | None = None

    @property
    def result(self) -> EvalResult | None:
        return self.file.result if self.file else None

    @property
    def held_out(self) -> EvalResult | None:
        return self.holdout.result if self.holdout else None

    @property
    def pipeline(self) -> Mapping[str, Any]:
        return self.file.pipeline if self.file else {}

    @property
    def seconds(self) -> float | None:
        return (self.finished - self.started).total_seconds() if self.started and self.finished else None


@dataclass(frozen=True)
class StudyView:
    """A study as analysis and reports read it: its settings, space, project and typed trials."""

    folder: StudyFolder
    targets: tuple[str, ...]
    constraints: tuple[str, ...]
    space: SearchSpace | None  # None: a study written before spaces were recorded, whose file is gone
    space_file: str
    project: ProjectConfig
    trials: tuple[TrialRecord, ...]
    meta: StudyMeta
    #: human labels of its answers (studies/NAME/labels.jsonl), by answer fingerprint
    labels: Mapping[str, Label] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def compared(self) -> list[str]:
        """The metrics comparisons lead with: the targets, then the guards."""
        return list(dict.fromkeys([*self.targets, *(Constraint.parse(c).metric for c in self.constraints)]))

    @property
    def split(self) -> Split:
        """The questions held out for the verdict (none for a study recorded before splits existed)."""
        return self.meta.held_out

    @property
    def target(self) -> str:
        return self.targets[0]

    @property
    def baseline(self) -> TrialRecord | None:
        """The baseline's run that finished (a killed baseline is re-run and keeps the mark)."""
        return next((t for t in self.trials if t.baseline and t.state == "complete"), None)

    @property
    def best(self) -> TrialRecord | None:
        """Single objective: the best feasible complete trial (ties: the earliest)."""
        if len(self.targets) != 1:
            return None
        best = best_of([t for t in self.trials if t.state == "complete" and t.feasible and t.values], self.lower)
        return best[0] if best else None

    @property
    def lower(self) -> list[bool]:
        """Per target: minimised (a cost) or not."""
        return [lower_is_better(t) for t in self.targets]

    @property
    def front(self) -> list[TrialRecord]:
        """Several targets: the feasible complete trials no other trial beats on every target."""
        return best_of([t for t in self.trials if t.state == "complete" and t.feasible and t.values], self.lower)

    def by_state(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for trial in self.trials:
            counts[trial.state] = counts.get(trial.state, 0) + 1
        return counts


def read_study(folder: StudyFolder) -> StudyView:
    """Everything a report needs, from the study's storage and trial records alone (no model is loaded)."""
    study = load_study(folder)
    meta = folder.read_meta() or StudyMeta(())
    space = None
    if meta.space:
        space = SearchSpace.of(meta.space, meta.config)
    elif meta.search_space and Path(meta.search_space).is_file():
        space = load_space(meta.search_space, meta.config)
    return StudyView(folder, meta.targets, meta.constraints, space, meta.search_space, meta.config,
                     tuple(trial_records(study, folder)), meta, folder.labels())


def trial_records(study: optuna.Study, folder: StudyFolder) -> list[TrialRecord]:
    trials = study.get_trials(deepcopy=False)
    records = []
    for t, state in zip(trials, trial_states(trials)):
        file = folder.read_trial(t.number)
        holdout = folder.read_trial(t.number, held_out=True) if file else None
        if holdout and (holdout.pipeline != file.pipeline or holdout.result.models != file.result.models):
            holdout = None  # stale: it scored something else than this trial
        records.append(TrialRecord(
            number=t.number, state=state, params=dict(t.params), values=tuple(t.values) if t.values else None,
            baseline=bool(t.user_attrs.get(BASELINE)), rerun_of=t.user_attrs.get(RERUN_OF), feasible=feasible(t),
            started=t.datetime_start, finished=t.datetime_complete, file=file, holdout=holdout,
            spent=None if file is not None else spent(t.user_attrs)))
    return records


def feasible(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether it met every guard: the violations Optuna keeps for its samplers (`trial.set_constraint`), or
    those a study from before them kept beside its results."""
    violations = trial.constraints.values() or legacy_constraints(trial.user_attrs)
    return all(v <= 0 for v in violations)


def best_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The best complete trial (single objective) or the Pareto front, among trials meeting the constraints."""
    return best_of([t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if feasible(t)],
                   [d == optuna.study.StudyDirection.MINIMIZE for d in study.directions])


def best_of(trials: list, lower: Sequence[bool]) -> list:
    """The one rule for "best", over Optuna's trials or tuner's records alike (both have `values` and `number`):
    `lower[i]`: objective i is minimised (a cost). With one objective the best value (ties: the earliest trial),
    with several the trials no other beats on all."""
    if not trials:
        return []
    signs = [-1.0 if low else 1.0 for low in lower]

    def gains(trial) -> list[float]:
        return [s * v for s, v in zip(signs, trial.values)]

    if len(signs) == 1:
        return [max(trials, key=lambda t: (gains(t)[0], -t.number))]
    return [t for t in trials if not any(all(o >= v for o, v in zip(gains(other), gains(t)))
                                         and list(other.values) != list(t.values) for other in trials)]




def trial_states(trials: list[optuna.trial.FrozenTrial]) -> list[str]:
    """Each trial's state for people: a failed trial that a resume (or, for a worker that died, another worker) re-ran
    is "interrupted", not a failure; a proposal that repeated a tried configuration is a "duplicate" (it ran
    nothing)."""
    rerun = {t.user_attrs[RERUN_OF] for t in trials if RERUN_OF in t.user_attrs}
    rerun |= {t.system_attrs["retry_history"][-1] for t in trials if t.system_attrs.get("retry_history")}
    return ["interrupted" if t.state == TrialState.FAIL and (t.number in rerun or INTERRUPTED in t.user_attrs)
            else "duplicate" if DUPLICATE in t.user_attrs else t.state.name.lower() for t in trials]


def load_study(folder: StudyFolder) -> optuna.Study:
    if folder.storage is None and not folder.read_meta():
        raise no_such_study(folder.name, folder.root.parent)
    try:
        return optuna.load_study(study_name=folder.name, storage=make_storage(folder))
    except KeyError:
        raise no_such_study(folder.name, folder.root.parent, folder.storage) from None


def shown_values(trial: optuna.trial.FrozenTrial, targets: list[str],
                 file: TrialFile | None) -> tuple[list[float | None], int | None]:
    """Each target's value for people, and for a pruned trial the questions it reached: its Optuna value is the
    last question's score alone, so the mean over the questions it reached (its trial `file`) is shown instead,
    marked partial."""
    if trial.state == TrialState.PRUNED:
        if file is None:
            return [None] * len(targets), None
        return [file.result.value(t) for t in targets], len(file.result.questions)
    return (list(trial.values) if trial.values else [None] * len(targets)), None


def require_a_complete_trial(study: optuna.Study) -> None:
    """A study whose every trial failed has no result: say why instead of "best —". A repeat is recorded as pruned
    (`DUPLICATE`) whatever its first run did, so it finishes nothing."""
    if any(DUPLICATE not in t.user_attrs
           for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))):
        return
    failed = study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
    reason = failed[-1].user_attrs.get(ERROR) if failed else None
    raise TunerError(f"no trial of study {study.study_name} finished ({len(failed)} failed"
                     + (f"; the last: {reason}" if reason else "") + "): nothing to report as best")


def study_runner(view: StudyView, on_progress=None):
    """A runner over a study's own project and caches (models load on first use); `on_progress` follows the index
    build (see pipeline.index)."""
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    return RagRunner(open_workspace(view.project, cache=view.folder.cache_in_use(view.meta), on_progress=on_progress))


def best_config(study: optuna.Study, folder: StudyFolder) -> dict[str, Any]:
    """A project config `tuner eval --config` accepts: the study's project settings + the best pipeline."""
    best = best_trials(study)
    if not best:
        raise ConfigError(f"study {folder.name} has no complete trial that meets its constraints yet")
    meta = folder.read_meta()
    # every path absolute (as tuner reads the study's: from here), since a config file reads its relative paths
    # from its own folder: written elsewhere (-o DIR/best.yaml) they would point nowhere
    project = meta.config
    project = absolute_paths(project.model_copy(update={
        "pipeline": project.pipeline.model_validate(best[0].user_attrs[PIPELINE])}))
    data = project.model_dump(mode="json", exclude_defaults=True)
    cache = folder.cache_in_use(meta)
    if not is_database(cache):  # a study's database is never written into a file (its URL may hold a password)
        data["cache_dir"] = str(Path(cache).absolute())
    needed = [m for m in meta.metrics if m]
    if needed:  # score what the study scored, so `tuner eval` re-scores it from the cache alone
        data.setdefault("evaluation", {})["metrics"] = needed
    data["pipeline"] = {**best[0].user_attrs[PIPELINE], "program": project.pipeline.program}
    return data


def write_config(path: Path, data: dict[str, Any], comment: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {comment}\n" + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def list_studies(studies_dir: Path, storage: str | None = None) -> list[StudyFolder]:
    """The studies in a folder, or in the database at `storage`."""
    if storage is not None:
        names = optuna.get_all_study_names(make_storage(study_folder(studies_dir, "any", storage)))
        return [study_folder(studies_dir, name, storage) for name in sorted(names)]
    if not studies_dir.is_dir():
        return []
    folders = (StudyFolder(p) for p in studies_dir.iterdir() if p.is_dir())
    return sorted((f for f in folders if f.meta.is_file() or f.journal.is_file()),
                  key=lambda folder: folder.name)
