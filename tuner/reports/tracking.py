"""A study mirrored to MLflow: the study as a parent run, each finished trial as a child run (knobs as params, every
metric and cost as metrics, the per-question results as an artifact) and the report as the parent's artifacts.

Idempotent: runs are found again by their tags, so syncing after every trial, on resume or twice logs nothing
twice. The study's own storage stays the record; a tracker that fails mid-study is a note, never a lost trial."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.cache import redact
from tuner.errors import ConfigError, TunerError
from tuner.evaluation.answerers import answerer_kind
from tuner.metrics import COST_METRICS
from tuner.study.results import StudyView, TrialRecord

STUDY_TAG, TRIAL_TAG, ROLE_TAG = "tuner.study", "tuner.trial", "tuner.role"
#: trial states a child run is logged for, and the MLflow run status each ends in
LOGGED = {"complete": "FINISHED", "pruned": "KILLED", "fail": "FAILED"}


#: seconds the check before a study waits for the tracker (mid-study calls keep MLflow's own retries)
CHECK_SECONDS = 10


def is_file_store(uri: str | None) -> bool:
    """A file: URI or a bare path (MLflow's own "databricks" aside): a store MLflow 3 refuses unless
    MLFLOW_ALLOW_FILE_STORE is set."""
    from urllib.parse import urlsplit

    return uri is not None and uri != "databricks" and urlsplit(uri).scheme in ("", "file")


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Environment variables set for a block, then as they were."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def parse_track(option: str) -> str | None:
    """`--track mlflow` (MLflow's own default: MLFLOW_TRACKING_URI, else its local store) or `mlflow:URI`."""
    kind, _, uri = option.partition(":")
    if kind != "mlflow":
        raise ConfigError(f"--track {option!r}: expected mlflow or mlflow:URI (e.g. mlflow:sqlite:///mlflow.db)")
    return uri or None


class MlflowTracker:
    def __init__(self, uri: str | None, experiment: str = "tuner"):
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise ConfigError("--track mlflow needs MLflow's client: pip install 'rag-tuner[track]'") from None
        logging.getLogger("mlflow").setLevel(logging.WARNING)  # its table migrations are not the user's news
        if is_file_store(uri) and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
            raise ConfigError(f"--track mlflow:{redact(uri)}: MLflow 3 refuses file stores; use a database "
                              f"(--track mlflow:sqlite:///mlflow.db) or set MLFLOW_ALLOW_FILE_STORE=true")
        self.experiment_name = experiment
        try:  # the up-front check answers in seconds: MLflow's own retries took 253 s to give up on a dead port
            with environment(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT=str(CHECK_SECONDS)):
                self.client = MlflowClient(tracking_uri=uri)
                found = self.client.get_experiment_by_name(experiment)
                self.experiment = found.experiment_id if found else self.client.create_experiment(experiment)
        except Exception as exc:  # a server down, a bad URI, a store MLflow refuses: many exception types
            said = str(exc).strip().splitlines()
            raise TunerError(f"--track: MLflow at {redact(uri or 'its default store')} did not answer "
                             f"({type(exc).__name__}: {redact(said[0] if said else '')[:200]})") from None

    def sync(self, view: StudyView, report_dir: Path | None = None) -> int:
        """Log what MLflow lacks of the study: its parent run, every finished trial not logged yet, and the
        report's files. Returns how many trials were logged now."""
        parent = self._parent(view)
        logged = {run.data.tags.get(TRIAL_TAG) for run in self.client.search_runs(
            [self.experiment], f"tags.`{STUDY_TAG}` = '{view.name}' and tags.`{ROLE_TAG}` = 'trial'",
            max_results=50000)}
        new = [t for t in view.trials if t.state in LOGGED and t.file is not None and str(t.number) not in logged]
        for trial in new:
            self._trial(view, parent, trial)
        best = view.best
        if best is not None:  # the study's answer so far, on the parent run
            for name, value in zip(view.targets, best.values):
                self.client.log_metric(parent, _name(f"best.{name}"), value, step=best.number)
        if report_dir is not None and (report_dir / "report.md").is_file():
            for path in sorted([report_dir / "report.md", *report_dir.glob("*.png")]):
                self.client.log_artifact(parent, str(path), "report")
        # a session that wrote its report has ended; trials logged without one belong to a running session
        self.client.update_run(parent, "FINISHED" if report_dir is not None else "RUNNING")
        return len(new)

    def _parent(self, view: StudyView) -> str:
        found = self.client.search_runs([self.experiment], f"tags.`{STUDY_TAG}` = '{view.name}' and "
                                        f"tags.`{ROLE_TAG}` = 'study'", max_results=1)
        if found:
            return found[0].info.run_id
        run = self.client.create_run(self.experiment, run_name=view.name,
                                     tags={STUDY_TAG: view.name, ROLE_TAG: "study"})
        params = {"targets": ", ".join(view.targets), "constraints": ", ".join(view.constraints) or "none",
                  "search_space": view.space_file, "sampler": view.meta.sampler,
                  "dataset": str(view.project.dataset.path or "demo"), "generator": view.project.generator.model,
                  "judge": view.project.judge_llm.model, "held_out": len(view.split.holdout_ids)}
        for name, value in params.items():
            self.client.log_param(run.info.run_id, name, value)
        return run.info.run_id

    def _trial(self, view: StudyView, parent: str, trial: TrialRecord) -> None:
        result = trial.result
        run = self.client.create_run(
            self.experiment, run_name=f"trial {trial.number}",
            tags={"mlflow.parentRunId": parent, STUDY_TAG: view.name, ROLE_TAG: "trial", TRIAL_TAG: str(trial.number),
                  "tuner.state": trial.state, "tuner.baseline": str(trial.baseline)})
        run_id = run.info.run_id
        recorded = answerer_kind(view.project).recorded(trial.file.pipeline)
        for name, value in {**(recorded.knobs() if recorded else trial.file.pipeline), **trial.params}.items():
            self.client.log_param(run_id, name, value)
        for name, value in metrics_of(result, trial.values, view.targets).items():
            self.client.log_metric(run_id, name, value, step=trial.number)
        self.client.log_dict(run_id, trial.file.to_json(), "per_question.json")
        self.client.set_terminated(run_id, LOGGED[trial.state])


def metrics_of(result, values: tuple[float, ...] | None, targets: tuple[str, ...]) -> dict[str, float]:
    """Every figure of a trial as MLflow metric names (no '@'): the targets' values, RAGAS, retrieval, costs."""
    figures: dict[str, Any] = {**result.metrics, **result.retrieval}
    figures.update({m: result.value(m) for m in COST_METRICS})
    figures.update({f"cost.{k}": v for k, v in result.cost.as_dict().items()})
    if values:
        figures.update({f"target.{t}": v for t, v in zip(targets, values)})
    return {_name(k): float(v) for k, v in figures.items() if isinstance(v, (int, float)) and v == v}


def _name(metric: str) -> str:
    return metric.replace("@", "_at_")

