"""`--track mlflow`: a study mirrored to a real local MLflow store — a parent run, a child run per finished trial,
the report as artifacts — logged once however often it is synced or resumed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import open_session, tuner
from tuner.errors import ConfigError, TunerError
from tuner.reports import write_report
from tuner.study.results import read_study

pytest.importorskip("mlflow", reason="needs the track extra (pip install -e '.[track]')")
from mlflow import MlflowClient

from tuner.reports.tracking import MlflowTracker, parse_track

TOP_K = {"params": {"top_k": {"type": "int", "low": 1, "high": 5}}}


def runs(uri: str, role: str) -> list:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("tuner")
    return client.search_runs([experiment.experiment_id], f"tags.`tuner.role` = '{role}'")


@pytest.mark.parametrize("store", ["sqlite", "file"])
def test_a_study_is_logged_once_per_trial_across_syncs_and_resumes(tmp_path, fake_embedder, monkeypatch, store):
    monkeypatch.chdir(tmp_path)  # a SQLite store keeps its artifacts in ./mlruns
    if store == "file":  # MLflow 3 keeps its file store for those who opt in
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = f"sqlite:///{tmp_path}/mlflow.db" if store == "sqlite" else (tmp_path / "mlruns").as_uri()
    tracker = MlflowTracker(uri)
    session = open_session(tmp_path, fake_embedder, TOP_K, sampler="grid")
    session.run(3)
    assert tracker.sync(read_study(session.folder)) == 3
    assert tracker.sync(read_study(session.folder)) == 0  # nothing twice
    [parent] = runs(uri, "study")
    assert parent.info.status == "RUNNING" and parent.data.params["targets"] == "faithfulness"
    children = runs(uri, "trial")
    assert sorted(r.data.tags["tuner.trial"] for r in children) == ["0", "1", "2"]
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert "top_k" in child.data.params and "program" in child.data.params
        metrics = child.data.metrics
        assert {"faithfulness", "target.faithfulness", "recall_at_k", "seconds_per_question", "context_tokens",
                "cost.llm_calls"} <= set(metrics)
        files = [a.path for a in MlflowClient(uri).list_artifacts(child.info.run_id)]
        assert files == ["per_question.json"]

    resumed = open_session(tmp_path, fake_embedder, TOP_K, sampler="grid")  # the same study, resumed
    resumed.run(5)
    view = read_study(resumed.folder)
    report = write_report(view, tmp_path / "report")
    assert tracker.sync(view, report.path.parent) == 2
    assert len(runs(uri, "trial")) == 5 and len(runs(uri, "study")) == 1
    [parent] = runs(uri, "study")
    assert parent.info.status == "FINISHED" and "best.faithfulness" in parent.data.metrics
    artifacts = {a.path for a in MlflowClient(uri).list_artifacts(parent.info.run_id, "report")}
    assert "report/report.md" in artifacts and "report/history.png" in artifacts


def test_tracking_errors_are_one_line(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="expected mlflow or mlflow:URI"):
        parse_track("wandb")
    assert parse_track("mlflow") is None and parse_track("mlflow:sqlite:///x.db") == "sqlite:///x.db"
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    with pytest.raises(TunerError, match=r"MLflow at http://127.0.0.1:9 did not answer"):
        MlflowTracker("http://127.0.0.1:9")
    with pytest.raises(TunerError) as refused:  # a password in the URI is never printed
        MlflowTracker("http://bob:s3cret@127.0.0.1:9")
    assert "s3cret" not in str(refused.value) and "bob:***@" in str(refused.value)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"pip install 'rag-tuner\[track\]'"):
        MlflowTracker(None)


def test_tuner_optimize_track_logs_trials_and_the_report_and_resumes_without_duplicates(tmp_path):
    """Real retrieval on the demo (no LLM), through the command line, killed by nothing but run twice."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    args = ("optimize", "--target", "ndcg@10", "--search-space", "retrieval", "--limit", "8", "--study", "tracked",
            "--track", f"mlflow:{uri}")
    first = tuner(*args, "--trials", "3", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert len(runs(uri, "trial")) == 3
    again = tuner(*args, "--trials", "5", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    children = runs(uri, "trial")
    assert sorted(int(r.data.tags["tuner.trial"]) for r in children) == [0, 1, 2, 3, 4]
    assert all("ndcg_at_10" in r.data.metrics and "chunk_size" in r.data.params for r in children)
    [parent] = runs(uri, "study")
    artifacts = {a.path for a in MlflowClient(uri).list_artifacts(parent.info.run_id, "report")}
    assert "report/report.md" in artifacts
    down = subprocess.run([sys.executable, "-m", "tuner", "optimize", "--target", "ndcg@10", "--study", "other",
                           "--limit", "8", "--trials", "2", "--track", "mlflow:http://127.0.0.1:9"], cwd=tmp_path,
                          env={**os.environ, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
                               "MLFLOW_HTTP_REQUEST_TIMEOUT": "3"},
                          capture_output=True, text=True, timeout=300)
    assert down.returncode != 0 and "did not answer" in down.stderr and "Traceback" not in down.stderr
    assert not (tmp_path / "studies" / "other").exists()  # refused before the study was created


def test_an_own_system_s_trials_log_its_knobs_not_tuner_s_pipeline(tmp_path, fake_embedder, monkeypatch):
    from pathlib import Path

    from tuner.config import ProjectConfig

    tests = Path(__file__).parent
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OWN_SYSTEM_CORPUS", str(tests.parent / "tuner" / "data" / "demo" / "corpus.jsonl"))
    project = ProjectConfig(cache_dir=tmp_path / "cache", system={
        "python": "own_system:answer", "path": tests, "version": "1", "knobs": {"k": {"type": "int", "default": 2}}})
    session = open_session(tmp_path, fake_embedder, {"params": {"k": {"type": "int", "low": 1, "high": 3}}},
                           sampler="grid", limit=3, project=project)
    session.run(2)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert MlflowTracker(uri).sync(read_study(session.folder)) == 2
    for child in runs(uri, "trial"):
        assert set(child.data.params) == {"k"} and "faithfulness" in child.data.metrics
