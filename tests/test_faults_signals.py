"""Signals: Ctrl-C, SIGTERM and SIGHUP (and a kill, and a closed terminal) during evaluation, an endpoint call, an
in-process model call and a round of a study stop at once, mark the trial interrupted, write the report and leave a
study that resumes."""

from __future__ import annotations

import io
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from tests.fakes import FakeEndpoint
from tests.helpers import SPACE, interruptible, open_session, signal_when, started
from tuner.study.optimize import TrialStarted, recover_interrupted
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
        time.sleep(0.01)
    # at once: round 2's trials reuse round 1's indexes (and TPE's repeats are answered from their first run), so
    # the whole round can take under a second; a signal that lands after it is a Ctrl-C on a finished run
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

    def ctrl_c_as_the_trial_starts(event):
        if isinstance(event, TrialStarted):  # before the first question: the trial is drawn and announced
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.run(2, hook=ctrl_c_as_the_trial_starts)
    assert trial_states(session.study.trials) == ["interrupted"]
    resumed = open_session(tmp_path, fake_embedder, SPACE, limit=2)
    assert resumed.recovered == [0] and resumed.run(2) == 2


# --- SIGTERM and SIGHUP stop as Ctrl-C does ----------------------------------------------------------------------

class HungUpTerminal(io.StringIO):
    """What a terminal is after its ssh session closed: still a tty, every write fails."""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")


def cached_calls(path) -> int:
    """Calls stored in an LLM cache (not the leases of calls in flight)."""
    with sqlite3.connect(path) as db:
        try:
            return db.execute("select count(*) from entries").fetchone()[0]
        except sqlite3.OperationalError:  # not created yet
            return 0


@pytest.mark.parametrize("stop, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_mark_the_trial_write_the_report_and_exit_128_plus_the_signal(tmp_path, stop, code):
    with FakeEndpoint("slow", delay=120) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m", "timeout": 300}}))
        process = started([sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--trials", "2",
                           "--limit", "2", "--study", "night", "--judge-check", "off", "--search-space", "quick"],
                          tmp_path)
        deadline = time.time() + 300
        while not server.requests:  # the first trial waits for its first answer
            assert process.poll() is None and time.time() < deadline, process.communicate()
            time.sleep(0.2)
        sent = time.monotonic()
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=60)
        took = time.monotonic() - sent
    name = signal.Signals(stop).name
    assert process.returncode == code and took < 5, (took, stderr)
    assert "Traceback" not in stderr, stderr
    assert [line for line in stderr.splitlines() if "interrupted" in line] == [
        f"interrupted by {name}: stopping; run the same command again to resume (the trial in progress runs again)"]
    assert (tmp_path / "reports" / "night" / "report.md").is_file()
    study = load_study(study_folder(tmp_path / "studies", "night"))
    assert trial_states(study.trials) == ["interrupted"] and study.trials[0].user_attrs["interrupted"] == name


def test_a_closed_terminal_stops_the_study_and_its_report_is_written(tmp_path):
    """A real terminal that goes away (tmux's session killed, as a closed ssh session): the study hears SIGHUP, its
    writes to the dead terminal must not stop the clean-up, and the report is written."""
    import shutil

    if shutil.which("tmux") is None:
        pytest.skip("needs tmux (.ci/run installs it)")
    server_name = f"tuner-test-{os.getpid()}"
    with FakeEndpoint("slow", delay=120) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m", "timeout": 300}}))
        command = (f"{sys.executable} -m tuner optimize --config tuner.yaml --trials 2 --limit 2 --study ssh "
                   f"--judge-check off --search-space quick")
        subprocess.run(["tmux", "-L", server_name, "new-session", "-d", "-s", "ssh", "-c", str(tmp_path), command],
                       check=True)
        pid = int(subprocess.run(["tmux", "-L", server_name, "list-panes", "-t", "ssh", "-F", "#{pane_pid}"],
                                 capture_output=True, text=True, check=True).stdout.split()[0])
        try:
            deadline = time.time() + 300
            while not server.requests:
                assert time.time() < deadline, "the study never asked the model"
                time.sleep(0.2)
            subprocess.run(["tmux", "-L", server_name, "kill-server"], check=True)  # the terminal goes away
            deadline = time.time() + 60
            while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
                assert time.time() < deadline, "still running a minute after its terminal closed"
                time.sleep(0.2)
        finally:
            subprocess.run(["tmux", "-L", server_name, "kill-server"], capture_output=True)
    assert (tmp_path / "reports" / "ssh" / "report.md").is_file()
    study = load_study(study_folder(tmp_path / "studies", "ssh"))
    assert trial_states(study.trials) == ["interrupted"] and study.trials[0].user_attrs["interrupted"] == "SIGHUP"


def test_after_sighup_a_dead_terminal_does_not_stop_the_clean_up(monkeypatch):
    from tuner import ui
    from tuner.cli._interrupt import _quiet_a_hung_up_terminal

    monkeypatch.setattr(sys, "stderr", HungUpTerminal())
    # the consoles' own slot (None: follow sys), so that undoing the patch does not pin them to this test's streams
    monkeypatch.setattr(ui.err_console, "_file", HungUpTerminal())
    piped = io.StringIO()
    monkeypatch.setattr(ui.console, "_file", piped)
    with pytest.raises(OSError):
        ui.err_console.print("report: reports/night/report.md")
    _quiet_a_hung_up_terminal()
    ui.err_console.print("report: reports/night/report.md")  # dropped, not raised
    sys.stderr.write("a library's warning\n")
    ui.console.print("a table")
    assert piped.getvalue() == "a table\n"  # a pipe or file is left as it was


def test_a_sighup_that_nohup_ignores_stays_ignored(tmp_path):
    """`nohup tuner optimize …` must survive the closed session it was started for."""
    with FakeEndpoint("slow", delay=120) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m", "timeout": 300}}))
        process = started([sys.executable, "-m", "tuner", "eval", "--config", "tuner.yaml", "--limit", "1",
                           "--metrics", "faithfulness"], tmp_path, ignore=(signal.SIGHUP,))
        deadline = time.time() + 300
        while not server.requests:
            assert process.poll() is None and time.time() < deadline, process.communicate()
            time.sleep(0.2)
        process.send_signal(signal.SIGHUP)
        time.sleep(3)
        assert process.poll() is None  # still running
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143 and "interrupted by SIGTERM: stopping" in stderr, stderr


@pytest.mark.slow
def test_a_real_sigterm_during_a_0_5b_trial_writes_the_report_and_the_resume_pays_no_call_twice(tmp_path,
                                                                                                  small_gguf):
    model = {"model": "qwen2.5-0.5b", "path": str(small_gguf)}
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
    command = [sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--trials", "1", "--limit", "2",
               "--study", "local", "--judge-check", "off", "--search-space", "quick"]
    process = started(command, tmp_path)
    cache = tmp_path / "studies" / ".cache" / "llm_calls.sqlite"
    deadline = time.time() + 600
    while not (cache.exists() and cached_calls(cache) >= 2):  # calls paid and stored, the trial going on
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143 and "Traceback" not in stderr, stderr
    paid = cached_calls(cache)
    # the report counts what the stopped trial paid, also when the watcher marked it (a native call held on)
    report = (tmp_path / "reports" / "local" / "report.md").read_text()
    counted = re.search(r"\| LLM calls \| (\d+) paid \(([\d,]+) tokens\)", report)
    assert counted and int(counted.group(1)) >= 2 and counted.group(2) != "0", report
    assert " 0 s inside trials" not in report
    study = load_study(study_folder(tmp_path / "studies", "local"))
    assert trial_states(study.trials) == ["interrupted"] and study.trials[0].user_attrs["interrupted"] == "SIGTERM"

    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: trial(s) 0 were interrupted and run again" in resumed.stderr
    folder = study_folder(tmp_path / "studies", "local")
    rerun = [t for t in load_study(folder).trials if t.state.name == "COMPLETE"]
    cost = folder.read_trial(rerun[0].number).result.cost
    assert cost.cache_hits >= paid  # every call paid before the kill came from the cache
    assert cached_calls(cache) == paid + cost.llm_calls  # and each new call was paid once


def test_a_stop_marked_by_both_the_watcher_and_the_unwinding_trial_is_told_to_optuna_once(monkeypatch):
    """A native call returning just as the watcher gives up waiting: whichever marks the trial first keeps it."""
    import threading

    import optuna

    from tuner.study import running as registry
    from tuner.study.attrs import INTERRUPTED

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    monkeypatch.setattr(registry, "_leaving", threading.Event())
    study = optuna.create_study()
    # the trial unwinds first: the watcher leaves it alone, and Optuna is told it failed without "Cannot tell"
    trial = study.ask()
    with registry.running(trial):
        registry.unwinding(trial, "SIGTERM")
        registry.mark_interrupted("SIGTERM")
        assert study.trials[0].state == optuna.trial.TrialState.RUNNING
    study.tell(trial, state=optuna.trial.TrialState.FAIL)
    assert study.trials[0].user_attrs[INTERRUPTED] == "SIGTERM"

    # the watcher marks first: the unwinding trial waits for the watcher's exit instead of telling Optuna again
    monkeypatch.setattr(registry, "_leaving", threading.Event())
    marked, told = threading.Event(), []

    def objective(trial):
        with registry.running(trial):
            marked.wait()
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                registry.unwinding(trial, "SIGTERM")
                raise

    def optimize_once():
        try:
            study.optimize(objective, n_trials=1)
        finally:
            told.append(True)

    # left waiting, as the watcher's os._exit would end it
    unwinder = threading.Thread(target=optimize_once, daemon=True)
    unwinder.start()
    while not registry.any_running():
        time.sleep(0.01)
    registry.mark_interrupted("SIGTERM")
    marked.set()
    unwinder.join(1)
    assert unwinder.is_alive() and not told
    second = study.trials[1]
    assert second.state == optuna.trial.TrialState.FAIL and second.user_attrs[INTERRUPTED] == "SIGTERM"


BROKEN_BY_THE_STOP = """
import os, signal, time
from tuner.cli import app, main

@app.command("broken-by-a-stop")
def broken() -> None:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
    except KeyboardInterrupt:  # as optuna's journal lock, renamed away while the stop unwound its write
        raise FileNotFoundError(2, "No such file or directory", "journal.log.lock1234.rename")

main()
"""


def test_a_file_error_raised_while_a_stop_unwinds_is_the_stop_not_an_error(tmp_path):
    """CI met it once: Ctrl-C in round 2 cut optuna's journal lock mid-rename, and the unwinding raised
    FileNotFoundError, which left as `error: No such file or directory … .rename`, exit 1."""
    result = subprocess.run([sys.executable, "-c", BROKEN_BY_THE_STOP, "broken-by-a-stop"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert "No such file" not in result.stderr and "Traceback" not in result.stderr
