"""One study, several workers, a real PostgreSQL server (started by `.ci/postgres`): `tuner optimize` processes in
separate folders (as on separate machines) share trials, records and paid LLM calls through the database alone,
and a worker killed mid-trial has its trial failed and retried by another after the heartbeat grace period."""

from __future__ import annotations

import collections
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.fakes import FakeEndpoint
from tests.helpers import tuner
from tuner.cache import open_store
from tuner.study.results import read_study
from tuner.study.storage import study_folder

pytest.importorskip("sentence_transformers", reason="workers embed with the real embedder (the embed extra)")


def machine(tmp_path, name: str, endpoint: FakeEndpoint) -> os.PathLike:
    """A worker's own folder (its own studies/, no shared file) with a config that uses the scripted endpoint."""
    folder = tmp_path / name
    folder.mkdir()
    model = {"backend": "openai-compatible", "base_url": endpoint.url, "model": "m"}
    (folder / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
    return folder


def worker(folder, url: str, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--storage", url, "--study",
               "shared", "--search-space", "quick", "--limit", "3", "--holdout", "0", "--judge-check", "off",
               "--target", "faithfulness", *extra]
    return subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})


def finish(process: subprocess.Popen) -> str:
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0 and "Traceback" not in stderr, stderr
    return stderr


def paid_twice(endpoint: FakeEndpoint) -> list[bytes]:
    return [body for body, n in collections.Counter(endpoint.bodies).items() if n > 1]


def test_three_workers_share_one_study_without_duplicates_lost_trials_or_calls_paid_twice(tmp_path, postgres_url):
    with FakeEndpoint("scripted", delay=0.05) as endpoint:
        folders = [machine(tmp_path, f"machine{i}", endpoint) for i in range(3)]
        for done in [finish(p) for p in [worker(f, postgres_url, "--trials", "6") for f in folders]]:
            assert "report:" in done
    assert paid_twice(endpoint) == []  # no LLM call reached the model twice, across all workers
    assert endpoint.bodies and open_store(postgres_url, "llm_calls").repeated() == 0

    folder = study_folder(tmp_path / "elsewhere", "shared", postgres_url)  # a fourth machine: the URL alone
    view = read_study(folder)
    states = [t.state for t in view.trials]
    ran = [t for t in view.trials if t.state in ("complete", "pruned")]
    assert 6 <= len(ran) <= 8, states  # the target, plus at most one trial in flight on each other worker
    pipelines = [str(sorted(t.pipeline.items())) for t in ran]
    assert len(set(pipelines)) == len(pipelines)  # no configuration ran twice
    assert all(t.file is not None and len(t.result.questions) == 3 for t in ran)  # every record is in the database
    assert not (tmp_path / "machine0" / "studies" / "shared").exists()  # nothing a worker keeps to itself

    (tmp_path / "elsewhere").mkdir()
    listing = tuner("studies", "--storage", postgres_url, cwd=tmp_path / "elsewhere")
    assert listing.returncode == 0 and "shared" in listing.stdout, listing.stderr
    for command in (("trials",), ("best",), ("report",)):
        result = tuner(*command, "--study", "shared", "--storage", postgres_url, cwd=tmp_path / "elsewhere")
        assert result.returncode == 0 and "Traceback" not in result.stderr, (command, result.stderr)
        assert "postgresql" not in result.stdout  # a database URL (it may hold a password) is never printed
    assert (tmp_path / "elsewhere" / "reports" / "shared" / "report.md").is_file()

    # people's labels given on one machine are seen on another: they live in the database, not in a folder
    export = tmp_path / "machine0" / "to_label.csv"
    said = tuner("judge", "label", "--study", "shared", "--storage", postgres_url, "--n", "2", "--export",
                 str(export), cwd=tmp_path / "machine0")
    assert said.returncode == 0, said.stderr
    with export.open(newline="") as handle:
        rows = [{**row, "supported": "y"} for row in csv.DictReader(handle)]
    with export.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    said = tuner("judge", "label", "--study", "shared", "--storage", postgres_url, "--import", str(export),
                 cwd=tmp_path / "machine0")
    assert said.returncode == 0 and f"{len(rows)} label(s) imported into study shared's labels.jsonl" in said.stderr
    assert not (tmp_path / "machine0" / "studies" / "shared" / "labels.jsonl").exists()
    seen = read_study(study_folder(tmp_path / "elsewhere", "shared", postgres_url)).labels
    assert {label.key for label in seen.values()} == {row["key"] for row in rows} and len(rows) >= 2


def test_a_worker_killed_mid_trial_has_its_trial_retried_by_another(tmp_path, postgres_url):
    with FakeEndpoint("scripted", delay=0.3) as endpoint:
        first, second = machine(tmp_path, "first", endpoint), machine(tmp_path, "second", endpoint)
        doomed = worker(first, postgres_url, "--trials", "2", "--heartbeat", "1")
        deadline = time.time() + 300
        while len(endpoint.bodies) < 4:  # well into the baseline trial
            assert doomed.poll() is None and time.time() < deadline, doomed.communicate()
            time.sleep(0.1)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        paid_by_the_dead = len(endpoint.bodies)
        time.sleep(4)  # past the grace period (3 heartbeats of 1 s): the trial is stale
        finish(worker(second, postgres_url, "--trials", "2", "--heartbeat", "1"))
    view = read_study(study_folder(tmp_path / "elsewhere", "shared", postgres_url))
    states = [t.state for t in view.trials]
    assert states[0] == "interrupted" and states.count("complete") + states.count("pruned") == 2, states
    retry = next(t for t in view.trials if t.baseline and t.state in ("complete", "pruned"))
    assert retry.number > 0 and retry.file is not None  # the dead worker's baseline ran again, elsewhere
    # what the dead worker had paid for came back from the database: nothing reached the model twice (the call in
    # flight when it died was never answered to it, so paying it again is not paying twice)
    assert len(endpoint.bodies) > paid_by_the_dead and len(paid_twice(endpoint)) <= 1


def trials_started_at_once(study, config, number_of_trials: int = 2):
    """Trials started at once on two workers, each having said what it runs (before looking for repeats)."""
    from tuner.study.attrs import PROJECT

    trials = [study.ask() for _ in range(number_of_trials)]
    for trial in trials:
        trial.set_user_attr("pipeline", config.model_dump())
        trial.set_user_attr(PROJECT, "p")
    return trials


@pytest.mark.parametrize("later_decides", ["runs", "yields", "after a moment", "never (died)"])
def test_two_trials_of_one_configuration_started_at_once_run_it_once(later_decides, monkeypatch):
    """The earlier trial waits for the later one's decision: the later one may have looked before the earlier said
    what it runs (then it runs it), or after (then it yields). Either way exactly one runs it."""
    import threading

    import optuna

    from tuner.config import PipelineConfig
    from tuner.study import optimize
    from tuner.study.attrs import DUPLICATE

    monkeypatch.setattr(optimize, "DECISION_SECONDS", 1.0)
    study, config = optuna.create_study(), PipelineConfig()
    earlier, later = trials_started_at_once(study, config)
    assert optimize.tried_before(study, config, "p", later.number) == earlier.number  # the later one yields at once
    if later_decides == "runs":
        later.set_user_attr(optimize.RUNS, True)
    elif later_decides == "yields":
        later.set_user_attr(DUPLICATE, earlier.number)
    elif later_decides == "after a moment":
        threading.Timer(0.3, lambda: later.set_user_attr(optimize.RUNS, True)).start()
    started = time.monotonic()
    found = optimize.tried_before(study, config, "p", earlier.number)
    assert found == (later.number if later_decides in ("runs", "after a moment") else None)
    assert (time.monotonic() - started >= 0.9) == (later_decides == "never (died)")  # waits only for the undecided


def test_a_second_worker_reads_another_s_labels_and_compiled_program_from_the_database(tmp_path, postgres_url):
    from tests.helpers import answer
    from tuner.evaluation.labels import Label
    from tuner.prompts.programs import load_program

    here, there = study_folder(tmp_path / "a", "s", postgres_url), study_folder(tmp_path / "b", "s", postgres_url)
    program = tmp_path / "a" / "studies-programs" / "compiled.json"
    program.parent.mkdir(parents=True)
    load_program("strict").save(str(program))
    here.keep_program(program)
    here.add_label(Label.of(answer("q1", "Paris."), True, 0))
    recorded = str(program.resolve())
    program.unlink()  # the other machine has no such file: only the database
    copies = there.program_files([recorded])
    assert copies[recorded].parent == tmp_path / "b" / "s" / "programs"
    assert load_program(str(copies[recorded])).respond.signature.instructions == \
        load_program("strict").respond.signature.instructions
    assert [label.question_id for label in there.labels().values()] == ["q1"]


def test_two_workers_tune_one_own_system_and_label_its_answers_from_another_machine(tmp_path, postgres_url,
                                                                                    monkeypatch):
    """An HTTP system shared by two workers of one PostgreSQL study: no (question, knobs) is asked of it twice, no
    judge call paid twice, and its answers are labelled from a third machine."""
    from tests.fakes import SystemServer

    sys.path.insert(0, str(Path(__file__).parent))
    monkeypatch.setenv("OWN_SYSTEM_CORPUS", str(Path(__file__).parents[1] / "tuner" / "data" / "demo" /
                                                 "corpus.jsonl"))
    import own_system

    with FakeEndpoint("scripted", delay=0.05) as endpoint, SystemServer(own_system.answer, delay=0.05) as system:
        folders = [machine(tmp_path, f"machine{i}", endpoint) for i in range(2)]
        for folder in folders:
            config = yaml.safe_load((folder / "tuner.yaml").read_text())
            config["system"] = {"http": system.url, "version": "1", "knobs": {"k": {"type": "int", "default": 2}}}
            (folder / "tuner.yaml").write_text(yaml.safe_dump(config))
            (folder / "space.yaml").write_text(yaml.safe_dump({"params": {"k": {"type": "int", "low": 1,
                                                                                "high": 6}}}))
        for done in [finish(p) for p in [worker(f, postgres_url, "--trials", "4", "--search-space", "space.yaml")
                                         for f in folders]]:
            assert "report:" in done
        asked = system.asked()
    assert asked and len(asked) == len(set(asked))  # the system answered each question once per knobs
    assert paid_twice(endpoint) == []
    view = read_study(study_folder(tmp_path / "elsewhere", "shared", postgres_url))
    ran = [t for t in view.trials if t.state in ("complete", "pruned")]
    assert len(ran) >= 4 and all("system" in t.result.models for t in ran)
    (tmp_path / "elsewhere").mkdir()
    export = tmp_path / "elsewhere" / "to_label.csv"
    said = tuner("judge", "label", "--study", "shared", "--storage", postgres_url, "--n", "2", "--export",
                 str(export), cwd=tmp_path / "elsewhere")
    assert said.returncode == 0, said.stderr
    with export.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    answers = {q.answer for t in ran for q in t.result.questions}
    assert rows and all(row["answer"] in answers for row in rows)  # the system's own answers, to label
