"""Signals: Ctrl-C (and a kill) during evaluation, an endpoint call, an in-process model call and a round of a
study stop at once, mark the trial interrupted and leave a study that resumes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.fakes import FakeEndpoint
from tests.helpers import SPACE, interruptible, open_session, signal_when
from tuner.study.optimize import recover_interrupted
from tuner.study.results import load_study, trial_states
from tuner.study.storage import study_folder


def test_ctrl_c_during_eval_stops_at_once_and_promises_no_resume(tmp_path):
    """`tuner eval` has no trial to run again: its interrupted line says so by not promising one."""
    with FakeEndpoint("slow", delay=120) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m", "timeout": 300}}))
        process = interruptible([sys.executable, "-m", "tuner", "eval", "--config", "tuner.yaml", "--limit", "1",
                                 "--metrics", "faithfulness"], tmp_path)
        deadline = time.time() + 300
        while not server.requests:
            assert process.poll() is None and time.time() < deadline, process.communicate()
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert [line for line in stderr.splitlines() if "interrupted" in line] == ["interrupted: stopping"]


def test_ctrl_c_during_an_endpoint_call_stops_at_once_and_the_trial_runs_again(tmp_path):
    """A real `tuner optimize` subprocess waiting on a model server gets SIGINT: exit 130 within seconds, one
    line, no traceback; the trial is marked interrupted and a resume queues it again."""
    with FakeEndpoint("slow", delay=120) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m", "timeout": 300}}))
        command = [sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--trials", "2", "--limit",
                   "2", "--study", "night", "--judge-check", "off", "--search-space", "quick"]
        process = interruptible(command, tmp_path)
        # the first trial is waiting for its first answer
        stderr, took = signal_when(process, lambda: server.requests, signal.SIGINT)
    assert process.returncode == 130 and took < 5, (took, stderr)
    assert "Traceback" not in stderr and "[W " not in stderr, stderr
    assert [line for line in stderr.splitlines() if "interrupted" in line] == [
        "interrupted: stopping; run the same command again to resume (the trial in progress runs again)"]
    assert (tmp_path / "reports" / "night" / "report.md").is_file()  # the clean-up ran
    folder = study_folder(tmp_path / "studies", "night")
    study = load_study(folder)
    assert trial_states(study.trials) == ["interrupted"]
    assert study.trials[0].user_attrs["interrupted"] == "Ctrl-C"
    assert recover_interrupted(study) == [0]  # what the resume does first: the baseline is queued again
    assert study.trials[1].user_attrs == {"baseline": True, "rerun_of": 0}
    assert recover_interrupted(study) == []  # once


@pytest.mark.slow
def test_ctrl_c_during_an_in_process_llama_cpp_call_stops_at_once(tmp_path, small_gguf):
    """The same for the real 0.5B model running in-process: SIGINT lands while llama.cpp is generating or
    judging (native code), and the process still leaves within seconds with one line."""
    model = {"model": "qwen2.5-0.5b", "path": str(small_gguf)}
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
    command = [sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--trials", "2", "--limit", "3",
               "--study", "local", "--judge-check", "off", "--search-space", "quick"]
    process = interruptible(command, tmp_path)
    cache = tmp_path / "studies" / ".cache" / "llm_calls.sqlite"  # the shared cache
    deadline = time.time() + 600
    while not cache.exists():  # the model is loaded and its first answer is being written
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.2)
    time.sleep(3)  # well inside the trial: 3 questions take the 0.5B model a minute or more
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    took = time.monotonic() - sent
    assert process.returncode == 130 and took < 5, (took, stderr)
    assert "Traceback" not in stderr, stderr
    assert sum("interrupted" in line for line in stderr.splitlines()) == 1, stderr
    study = load_study(study_folder(tmp_path / "studies", "local"))
    assert trial_states(study.trials) == ["interrupted"]  # a resume runs it again


@pytest.mark.slow
def test_rounds_killed_with_ctrl_c_in_round_2_resume_and_finish(tmp_path):
    """A retrieval rounds run (real embedder) gets SIGINT in round 2: the trial it stopped says interrupted (a plain
    FAIL was never run again), and the same command then finishes the rounds."""
    command = [sys.executable, "-m", "tuner", "optimize", "--target", "ndcg@10", "--search-space", "retrieval",
               "--trials", "12", "--rounds", "3", "--study", "rr", "--judge-check", "off"]
    process = interruptible(command, tmp_path)
    first_of_round_2 = tmp_path / "studies" / "rr.r2" / "trials" / "0000.json"
    deadline = time.time() + 600
    while not first_of_round_2.is_file():
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # inside round 2: its trials take a second or two each
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    studies = [f.name for f in (tmp_path / "studies").iterdir() if f.name.startswith("rr")]
    for name in studies:  # wherever the Ctrl-C landed, no trial is a failure a resume would leave be (a duplicate,
        # TPE drawing a configuration already tried, is answered from that trial: a finished state, not a failure)
        states = trial_states(load_study(study_folder(tmp_path / "studies", name)).trials)
        assert set(states) <= {"complete", "pruned", "duplicate", "interrupted", "running"}, (name, states)
    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert "rounds stopped:" in resumed.stderr and (tmp_path / "reports" / "rr" / "journey.md").is_file()
    round_2 = load_study(study_folder(tmp_path / "studies", "rr.r2"))
    assert trial_states(round_2.trials).count("complete") + trial_states(round_2.trials).count("pruned") >= 12


def test_ctrl_c_outside_the_evaluation_still_marks_the_trial_interrupted(tmp_path, fake_embedder):
    """In a retrieval study most of a trial is not its evaluation (the sampler, the record): a Ctrl-C there left a
    plain FAIL that no resume ran again (round 2 of a rounds run). Anywhere in the trial, it is interrupted."""
    session = open_session(tmp_path, fake_embedder, SPACE, limit=2)

    def ctrl_c_as_the_trial_starts(event, *args):
        if event == "trial":  # before the first question: the trial is drawn and announced
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.run(2, hook=ctrl_c_as_the_trial_starts)
    assert trial_states(session.study.trials) == ["interrupted"]
    resumed = open_session(tmp_path, fake_embedder, SPACE, limit=2)
    assert resumed.recovered == [0] and resumed.run(2) == 2
