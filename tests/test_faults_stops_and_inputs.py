"""The third battery of faults (issue 43): signals that stop a study, paths that are no files, metrics a set cannot
score, trackers that do not answer, brackets the terminal must print, and logs that hear from every long step.
Each case runs `tuner` as a user would and checks what it printed."""

from __future__ import annotations

import collections
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
import yaml

from tests.fakes import FakeEndpoint
from tests.helpers import one_line_error
from tuner.study.results import load_study, trial_states
from tuner.study.storage import study_folder

#: what every signal test's child gets: the default handlers a terminal session has (a shell's background job
#: ignores SIGINT, `nohup` SIGHUP, and tuner keeps a signal its parent ignored ignored)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run(*args, cwd, env=None, timeout=120) -> subprocess.CompletedProcess:
    """`tuner ARGS` with a deadline: a hang fails the test in minutes, not at the suite's end."""
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200", **(env or {})})


def started(command: list[str], cwd, ignore=()) -> subprocess.Popen:
    def handlers() -> None:
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN if number in ignore else signal.SIG_DFL)

    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=handlers)


# --- 1. paths that are no files: never opened ----------------------------------------------------------------------

def special_files(folder):
    """A named pipe, a socket and a device (a link to /dev/null) beside a real document; the socket stays bound."""
    folder.mkdir()
    (folder / "harbour.txt").write_text("The harbour of Nordvik opened in 1871.")
    os.mkfifo(folder / "pipe.txt")
    bound = socket.socket(socket.AF_UNIX)
    bound.bind(str(folder / "socket.md"))
    (folder / "null.txt").symlink_to("/dev/null")
    return bound


def test_ingest_leaves_out_a_pipe_a_socket_and_a_device_without_opening_them(tmp_path):
    bound = special_files(tmp_path / "docs")
    try:
        result = run("data", "ingest", "docs", "--out", "set", cwd=tmp_path)
    finally:
        bound.close()
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    printed = result.stdout + result.stderr
    assert "1 documents in set/corpus.jsonl" in printed
    for name, kind in (("pipe.txt", "a named pipe (FIFO)"), ("socket.md", "a socket"),
                       ("null.txt", "a character device")):
        assert re.search(rf"{re.escape(name)}.*{re.escape(kind)}, not a file: not opened", printed), printed
    manifest = json.loads((tmp_path / "set" / "ingest.json").read_text())["files"]
    assert manifest["pipe.txt"]["left_out"] == "a named pipe (FIFO), not a file: not opened"


def test_optimize_docs_on_a_folder_of_pipes_is_one_line(tmp_path):
    (tmp_path / "docs").mkdir()
    os.mkfifo(tmp_path / "docs" / "a.txt")
    os.mkfifo(tmp_path / "docs" / "b.md")
    one_line_error(run("optimize", "--docs", "docs", "--trials", "1", cwd=tmp_path),
                   "nothing readable", "a.txt: a named pipe (FIFO)")


@pytest.mark.parametrize("make, args, said", [
    ("pipe.jsonl", ("data", "pipe.jsonl"), "pipe.jsonl: is a named pipe (FIFO), not a file"),
    ("set/corpus.jsonl", ("data", "set/corpus.jsonl"), "corpus.jsonl: is a named pipe (FIFO), not a file"),
    ("tuner.yaml", ("eval", "--config", "tuner.yaml", "--retrieval-only"), "tuner.yaml: is a named pipe"),
    ("space.yaml", ("spaces", "show", "space.yaml"), "space.yaml: is a named pipe"),
])
def test_a_pipe_named_as_data_config_or_space_is_one_line(tmp_path, make, args, said):
    (tmp_path / make).parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / make)
    one_line_error(run(*args, cwd=tmp_path), said)


# --- 2 and 9. the strict judge check's advice repeats it, and a log hears from it -------------------------------------

def test_the_strict_judge_check_advises_the_check_that_failed_and_that_check_logs_its_progress(tmp_path):
    """The refusal's advice must judge the same cases (the same requests reach the judge), not the default 20
    questions; without a terminal, `judge check` writes progress lines while it judges."""
    with FakeEndpoint("ok", delay=0.3) as server:  # "Ilsa Marrow." to every call: no verdict parses
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"cache_dir": "cache", "generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m"}}))
        refused = run("optimize", "--config", "tuner.yaml", "--limit", "8", "--holdout", "0.25", "--judge-check",
                      "strict", "--trials", "1", "--search-space", "quick", cwd=tmp_path)
        said = one_line_error(refused, "judge check failed", started=True)
        advice = re.search(r"see `(tuner judge check[^`]*)`", said).group(1)
        assert advice == "tuner judge check --quick --config tuner.yaml --limit 8 --holdout 0.25 --metrics faithfulness"
        asked = collections.Counter(server.bodies)
        import shutil

        shutil.rmtree(tmp_path / "cache")  # paid again, so the advised check's requests can be compared
        server.mode, server.bodies[:] = "slow", []
        repeated = run(*advice.split()[1:], cwd=tmp_path, env={"TUNER_LOG_EVERY": "0.5"})
    assert repeated.returncode == 0, repeated.stderr
    assert collections.Counter(server.bodies) == asked  # the same calls: the same cases, the same questions
    logged = [line for line in repeated.stderr.splitlines() if re.search(r"faithfulness \S+ \S+: \d+/\d+", line)]
    assert any(re.search(r"\d+/\d+ \([\d.]+/s, about .* left\), .* so far$", line) for line in logged), logged


# --- 3. compare and optimize on a metric the set cannot score ------------------------------------------------------

@pytest.fixture
def bare_set(tmp_path):
    """RAGAS-style rows without gold ids or reference answers."""
    rows = [{"question": f"When did harbour {i} open?", "contexts": [f"Harbour {i} opened in 18{i}0."]}
            for i in range(1, 5)]
    path = tmp_path / "bare.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "a.yaml").write_text("{}\n")
    (tmp_path / "b.yaml").write_text("pipeline: {top_k: 2}\n")
    return path


#: every metric whose inputs a set can lack, and what it needs
LACKING = {**{m: "needs gold document ids (qrels), and bare has none" for m in (
    "recall@k", "recall@1", "recall@5", "recall@10", "precision", "ndcg@10", "mrr")},
    "context_recall": "needs reference answers, and bare has none",
    "context_precision": "needs reference answers, and bare has none"}


def test_compare_on_metrics_the_set_cannot_score_is_one_line_and_not_the_regression_code(tmp_path, bare_set):
    alone = run("compare", "a.yaml", "b.yaml", "--metric", "ndcg@10", "-d", str(bare_set), cwd=tmp_path)
    one_line_error(alone, f"--metric: ndcg@10 {LACKING['ndcg@10']}: it cannot be compared on this set")
    assert alone.returncode == 2  # 1 means "regression" to a CI job
    every = run("compare", "a.yaml", "b.yaml", *(f"--metric={m}" for m in [*LACKING, "faithfulness"]), "-d",
                str(bare_set), cwd=tmp_path)
    said = one_line_error(every, *(f"{metric} {lacks}" for metric, lacks in LACKING.items()))
    assert every.returncode == 2 and "faithfulness" not in said


def test_a_study_target_the_set_cannot_score_is_refused_before_any_trial(tmp_path, bare_set):
    one_line_error(run("optimize", "--target", "ndcg@10", "-d", str(bare_set), cwd=tmp_path),
                   "ndcg@10 needs gold document ids")
    assert not (tmp_path / "studies" / "default" / "study.json").exists()


# --- 4. trackers that cannot be used are refused in seconds -------------------------------------------------------

@pytest.mark.parametrize("uri, said", [
    ("file:///tmp/tuner-mlruns", ("MLflow 3 refuses file stores", "mlflow:sqlite:///", "MLFLOW_ALLOW_FILE_STORE=true")),
    ("http://127.0.0.1:9", ("MLflow at http://127.0.0.1:9 did not answer",)),
])
def test_a_tracker_that_cannot_be_used_is_one_line_within_seconds(tmp_path, uri, said):
    pytest.importorskip("mlflow", reason="needs the track extra")
    began = time.monotonic()
    result = run("optimize", "--track", f"mlflow:{uri}", "--target", "ndcg@10", "--limit", "2", cwd=tmp_path)
    assert time.monotonic() - began < 60  # MLflow's own retries took 253 s
    one_line_error(result, *said)
    assert not (tmp_path / "studies" / "default").exists()


# --- 5. square brackets print -----------------------------------------------------------------------------------

def test_advice_naming_an_extra_prints_its_brackets(tmp_path):
    pytest.importorskip("sentence_transformers", reason="needs the embed extra")
    try:
        import optimum.intel  # noqa: F401
        pytest.skip("the openvino extra is installed here: nothing to advise")
    except ImportError:
        pass
    (tmp_path / "tuner.yaml").write_text("embedder: {backend: openvino}\n")
    one_line_error(run("eval", "--config", "tuner.yaml", "--retrieval-only", "--limit", "1", cwd=tmp_path),
                   "pip install 'rag-tuner[openvino]'")


def test_help_prints_every_extra_it_names(tmp_path):
    import pathlib

    cli = pathlib.Path(__file__).resolve().parents[1] / "tuner" / "cli"
    source = "".join(p.read_text() for p in cli.glob("*.py"))
    named = set(re.findall(r"rag-tuner\\\\\[(\w+)\]", source))
    assert "track" in named
    printed = run("optimize", "--help", cwd=tmp_path).stdout
    for extra in named:
        assert f"rag-tuner[{extra}]" in printed.replace("\n", "")


def test_paths_and_names_with_brackets_print_as_they_are(tmp_path):
    (tmp_path / "docs[v2]").mkdir()
    (tmp_path / "docs[v2]" / "notes[draft].bin").write_bytes(b"\x00\x01")
    (tmp_path / "docs[v2]" / "harbour.txt").write_text("The harbour of Nordvik opened in 1871.")
    result = run("data", "ingest", "docs[v2]", "--out", "set[v2]", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "notes[draft].bin" in result.stdout + result.stderr and "set[v2]/corpus.jsonl" in result.stdout


# --- 6. spaces show checks what optimize checks --------------------------------------------------------------------

def test_spaces_show_refuses_the_space_optimize_refuses(tmp_path):
    (tmp_path / "space.yaml").write_text("params:\n  chunk_size: {type: int, low: 50, high: 60}\n"
                                         "  chunk_overlap: {type: int, low: 100, high: 120}\n")
    shown = one_line_error(run("spaces", "show", "space.yaml", cwd=tmp_path), "chunk_overlap (100) must be smaller")
    refused = one_line_error(run("optimize", "--search-space", "space.yaml", "--target", "ndcg@10", cwd=tmp_path))
    assert shown == refused


# --- 7. SIGTERM and SIGHUP stop as Ctrl-C does --------------------------------------------------------------------

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


class HungUpTerminal(io.StringIO):
    """What a terminal is after its ssh session closed: still a tty, every write fails."""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")


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


def cached_calls(path) -> int:
    """Calls stored in an LLM cache (not the leases of calls in flight)."""
    with sqlite3.connect(path) as db:
        try:
            return db.execute("select count(*) from entries").fetchone()[0]
        except sqlite3.OperationalError:  # not created yet
            return 0


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
    assert (tmp_path / "reports" / "local" / "report.md").is_file()
    paid = cached_calls(cache)
    study = load_study(study_folder(tmp_path / "studies", "local"))
    assert trial_states(study.trials) == ["interrupted"] and study.trials[0].user_attrs["interrupted"] == "SIGTERM"

    resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: trial(s) 0 were interrupted and run again" in resumed.stderr
    rerun = [t for t in load_study(study_folder(tmp_path / "studies", "local")).trials if t.state.name == "COMPLETE"]
    cost = rerun[0].user_attrs["cost"]
    assert cost["cache_hits"] >= paid  # every call paid before the kill came from the cache
    assert cached_calls(cache) == paid + cost["llm_calls"]  # and each new call was paid once



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

    def run():
        try:
            study.optimize(objective, n_trials=1)
        finally:
            told.append(True)

    unwinder = threading.Thread(target=run, daemon=True)  # left waiting, as the watcher's os._exit would end it
    unwinder.start()
    while not registry.any_running():
        time.sleep(0.01)
    registry.mark_interrupted("SIGTERM")
    marked.set()
    unwinder.join(1)
    assert unwinder.is_alive() and not told
    second = study.trials[1]
    assert second.state == optuna.trial.TrialState.FAIL and second.user_attrs[INTERRUPTED] == "SIGTERM"


# --- 8. retrieval quality against latency ---------------------------------------------------------------------

def test_a_retrieval_target_beside_a_cost_target_runs(tmp_path):
    result = run("optimize", "--target", "ndcg@10", "--target", "seconds_per_question", "--limit", "4",
                 "--trials", "3", "--search-space", "quick", "--study", "fast", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    trials = [t for t in load_study(study_folder(tmp_path / "studies", "fast")).trials if t.values]
    assert len(trials) == 3 and all(len(t.values) == 2 and t.values[1] > 0 for t in trials)
    guarded = run("optimize", "--target", "ndcg@10", "--constraint", "seconds_per_question<=5", "--limit", "4",
                  "--trials", "2", "--search-space", "quick", "--study", "guarded", cwd=tmp_path)
    assert guarded.returncode == 0, guarded.stderr


# --- 9. a log hears from every long step at least every 30 s -------------------------------------------------------

def test_eval_and_optimize_write_progress_lines_to_a_log(tmp_path):
    with FakeEndpoint("scripted", delay=0.4) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m"}}))
        evaluated = run("eval", "--config", "tuner.yaml", "--limit", "2", "--metrics", "faithfulness", cwd=tmp_path,
                        env={"TUNER_LOG_EVERY": "0.5"})
        optimized = run("optimize", "--config", "tuner.yaml", "--limit", "2", "--trials", "1", "--judge-check", "off",
                        "--search-space", "quick", "--own-cache", cwd=tmp_path, env={"TUNER_LOG_EVERY": "0.5"})
    assert evaluated.returncode == 0, evaluated.stderr
    assert re.search(r"^q\w+: \w+: \d/2 .*so far$", evaluated.stderr, re.M), evaluated.stderr
    assert re.search(r": \d/2 done in \d+ s$", evaluated.stderr, re.M), evaluated.stderr
    assert optimized.returncode == 0, optimized.stderr
    assert re.search(r"^trial 0: top_k=5.*: \d/2 .*so far$", optimized.stderr, re.M), optimized.stderr


def test_a_bar_and_a_status_without_a_terminal_write_a_line_per_interval(monkeypatch):
    from tuner import ui

    monkeypatch.setenv("TUNER_LOG_EVERY", "0.1")
    log = io.StringIO()
    monkeypatch.setattr(ui.err_console, "_file", log)  # its own slot: undone, it follows sys.stderr again
    with ui.progress() as bar:
        task = bar.add_task("embedding chunks", total=40)
        for done in range(1, 5):
            time.sleep(0.15)
            bar.update(task, completed=done * 10)
    with ui.status("hashing the model"):
        time.sleep(0.35)
    lines = log.getvalue().splitlines()
    assert any(re.fullmatch(r"embedding chunks: \d0/40 \([\d.]+/s, about \d+ s left\), 0 s so far", li) for li in lines)
    assert any(re.fullmatch(r"embedding chunks: 40/40 done in \d s", li) for li in lines), lines
    assert any(re.fullmatch(r"hashing the model: still running, 0 s so far", li) for li in lines), lines


# --- worth fixing while there ------------------------------------------------------------------------------------

def test_a_hub_with_no_route_is_one_line_at_once(tmp_path):
    began = time.monotonic()
    result = run("models", "install", "qwen2.5-0.5b", "--source", "hub", cwd=tmp_path,
                 env={"HF_ENDPOINT": "http://127.0.0.1:9", "TUNER_MODELS_DIR": str(tmp_path / "models")})
    assert time.monotonic() - began < 30  # huggingface_hub's retries took 24 s and printed 10 lines
    one_line_error(result, "could not be downloaded from http://127.0.0.1:9 (unreachable: Connection refused)")


def test_a_chunk_size_beyond_the_embedder_s_window_is_noted(tmp_path):
    pytest.importorskip("sentence_transformers", reason="needs the embed extra")
    result = run("eval", "--retrieval-only", "--set", "chunk_size=1000", "--limit", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "note: chunk_size 1000 words is about 1300 tokens, beyond the embedder's window of 256" in result.stderr
    quiet = run("eval", "--retrieval-only", "--limit", "1", cwd=tmp_path)
    assert "window" not in quiet.stderr, quiet.stderr


def test_a_dead_writer_endpoint_is_refused_before_the_first_trial(tmp_path):
    (tmp_path / "space.yaml").write_text("params:\n  top_k: {type: int, low: 2, high: 5}\n"
                                         "  contextual: {type: categorical, choices: [title, llm]}\n")
    (tmp_path / "dead.yaml").write_text(yaml.safe_dump({"generator": {
        "backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}))
    result = run("optimize", "--config", "dead.yaml", "--search-space", "space.yaml", "--target", "ndcg@10",
                 "--limit", "3", "--trials", "3", "--study", "ctx", cwd=tmp_path)
    one_line_error(result, "cannot reach the LLM endpoint http://127.0.0.1:9/v1", "contextual", started=True)
    trials = load_study(study_folder(tmp_path / "studies", "ctx")).trials
    assert [t.state.name for t in trials] == ["WAITING"]  # the baseline queued, not run: refused before it


def test_labels_with_the_wrong_columns_name_the_columns_expected(tmp_path):
    from tuner.errors import DataError
    from tuner.evaluation.labels import import_labels

    source = tmp_path / "labels.csv"
    source.write_text("answer,verdict\nq1,y\n")
    with pytest.raises(DataError, match=r"expected the columns key \(or trial and question_id\) and supported, "
                                        r"found answer, verdict"):
        import_labels(source, tmp_path / "labels.jsonl", lambda *args: None)
    assert not (tmp_path / "labels.jsonl").exists()


def test_a_truncated_model_file_names_the_failed_check(tmp_path, monkeypatch):
    from tuner.models import registry
    from tuner.models.llms import LLMError

    named = registry.named_model("qwen2.5-0.5b")
    monkeypatch.setenv("TUNER_MODELS_DIR", str(tmp_path))
    monkeypatch.delenv(named.env_var, raising=False)
    monkeypatch.setattr(registry, "part_files", lambda named: None)  # the parts go once the file is assembled
    (tmp_path / named.filename).write_bytes(b"GGUF" + bytes(1000))
    assert registry.locate(named).status.startswith("damaged (1,004 bytes, expected 491,400,064)")
    with pytest.raises(LLMError, match="failed its size check .1,004 bytes, expected 491,400,064: truncated"):
        registry.resolve_gguf("qwen2.5-0.5b", None)


def test_an_estimate_of_a_study_that_ran_says_what_is_left(tmp_path):
    ran = run("optimize", "--target", "ndcg@10", "--limit", "3", "--trials", "2", "--search-space", "quick",
              cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    estimated = run("optimize", "--estimate", "--trials", "5", cwd=tmp_path)
    assert estimated.returncode == 0, estimated.stderr
    assert "study default holds 2 finished trial(s) of the 5 asked: the estimate is for the 3 left" in \
        estimated.stderr
    assert "estimate for 3 trial(s)" in estimated.stdout
