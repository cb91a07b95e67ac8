"""What tuner prints for inputs it cannot use and for long work: paths that are no files, metrics a set cannot
score, trackers that do not answer, brackets the terminal must print, dead endpoints and damaged model files, and
logs that hear from every long step. Each case runs `tuner` as a user would and checks what it printed (the signals
that stop a study: tests/test_faults_signals.py)."""

from __future__ import annotations

import collections
import io
import json
import os
import re
import socket
import time

import pytest
import yaml

from tests.fakes import FakeEndpoint
from tests.helpers import one_line_error, run_tuner
from tuner.study.results import load_study
from tuner.study.storage import study_folder

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
        result = run_tuner("data", "ingest", "docs", "--out", "set", cwd=tmp_path)
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
    one_line_error(run_tuner("optimize", "--docs", "docs", "--trials", "1", cwd=tmp_path),
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
    one_line_error(run_tuner(*args, cwd=tmp_path), said)


# --- 2 and 9. the strict judge check's advice repeats it, and a log hears from it -------------------------------------

def test_the_strict_judge_check_advises_the_check_that_failed_and_that_check_logs_its_progress(tmp_path):
    """The refusal's advice must judge the same cases (the same requests reach the judge), not the default 20
    questions; without a terminal, `judge check` writes progress lines while it judges."""
    with FakeEndpoint("ok", delay=0.3) as server:  # "Ilsa Marrow." to every call: no verdict parses
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"cache_dir": "cache", "generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m"}}))
        refused = run_tuner("optimize", "--config", "tuner.yaml", "--limit", "8", "--holdout", "0.25", "--judge-check",
                      "strict", "--trials", "1", "--search-space", "quick", cwd=tmp_path)
        said = one_line_error(refused, "judge check failed", started=True)
        advice = re.search(r"see `(tuner judge check[^`]*)`", said).group(1)
        assert advice == "tuner judge check --quick --config tuner.yaml --limit 8 --holdout 0.25 --metrics faithfulness"
        asked = collections.Counter(server.bodies)
        import shutil

        shutil.rmtree(tmp_path / "cache")  # paid again, so the advised check's requests can be compared
        server.mode, server.bodies[:] = "slow", []
        repeated = run_tuner(*advice.split()[1:], cwd=tmp_path, env={"TUNER_LOG_EVERY": "0.5"})
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
    alone = run_tuner("compare", "a.yaml", "b.yaml", "--metric", "ndcg@10", "-d", str(bare_set), cwd=tmp_path)
    one_line_error(alone, f"--metric: ndcg@10 {LACKING['ndcg@10']}: it cannot be compared on this set")
    assert alone.returncode == 2  # 1 means "regression" to a CI job
    every = run_tuner("compare", "a.yaml", "b.yaml", *(f"--metric={m}" for m in [*LACKING, "faithfulness"]), "-d",
                str(bare_set), cwd=tmp_path)
    said = one_line_error(every, *(f"{metric} {lacks}" for metric, lacks in LACKING.items()))
    assert every.returncode == 2 and "faithfulness" not in said


def test_a_study_target_the_set_cannot_score_is_refused_before_any_trial(tmp_path, bare_set):
    one_line_error(run_tuner("optimize", "--target", "ndcg@10", "-d", str(bare_set), cwd=tmp_path),
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
    result = run_tuner("optimize", "--track", f"mlflow:{uri}", "--target", "ndcg@10", "--limit", "2", cwd=tmp_path)
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
    one_line_error(run_tuner("eval", "--config", "tuner.yaml", "--retrieval-only", "--limit", "1", cwd=tmp_path),
                   "pip install 'rag-tuner[openvino]'")


def test_help_prints_every_extra_it_names(tmp_path):
    import pathlib

    cli = pathlib.Path(__file__).resolve().parents[1] / "tuner" / "cli"
    source = "".join(p.read_text() for p in cli.glob("*.py"))
    named = set(re.findall(r"rag-tuner\\\\\[(\w+)\]", source))
    assert "track" in named
    printed = run_tuner("optimize", "--help", cwd=tmp_path).stdout
    for extra in named:
        assert f"rag-tuner[{extra}]" in printed.replace("\n", "")


def test_paths_and_names_with_brackets_print_as_they_are(tmp_path):
    (tmp_path / "docs[v2]").mkdir()
    (tmp_path / "docs[v2]" / "notes[draft].bin").write_bytes(b"\x00\x01")
    (tmp_path / "docs[v2]" / "harbour.txt").write_text("The harbour of Nordvik opened in 1871.")
    result = run_tuner("data", "ingest", "docs[v2]", "--out", "set[v2]", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "notes[draft].bin" in result.stdout + result.stderr and "set[v2]/corpus.jsonl" in result.stdout


# --- 6. spaces show checks what optimize checks --------------------------------------------------------------------

def test_spaces_show_refuses_the_space_optimize_refuses(tmp_path):
    (tmp_path / "space.yaml").write_text("params:\n  chunk_size: {type: int, low: 50, high: 60}\n"
                                         "  chunk_overlap: {type: int, low: 100, high: 120}\n")
    shown = one_line_error(run_tuner("spaces", "show", "space.yaml", cwd=tmp_path),
                           "chunk_overlap (100) must be smaller")
    refused = one_line_error(run_tuner("optimize", "--search-space", "space.yaml", "--target", "ndcg@10", cwd=tmp_path))
    assert shown == refused


# --- 8. retrieval quality against latency ---------------------------------------------------------------------

def test_a_retrieval_target_beside_a_cost_target_runs(tmp_path):
    result = run_tuner("optimize", "--target", "ndcg@10", "--target", "seconds_per_question", "--limit", "4",
                 "--trials", "3", "--search-space", "quick", "--study", "fast", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    trials = [t for t in load_study(study_folder(tmp_path / "studies", "fast")).trials if t.values]
    assert len(trials) == 3 and all(len(t.values) == 2 and t.values[1] > 0 for t in trials)
    guarded = run_tuner("optimize", "--target", "ndcg@10", "--constraint", "seconds_per_question<=5", "--limit", "4",
                  "--trials", "2", "--search-space", "quick", "--study", "guarded", cwd=tmp_path)
    assert guarded.returncode == 0, guarded.stderr


# --- 9. a log hears from every long step at least every 30 s -------------------------------------------------------

def test_eval_and_optimize_write_progress_lines_to_a_log(tmp_path):
    with FakeEndpoint("scripted", delay=0.4) as server:
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
            "backend": "openai-compatible", "base_url": server.url, "model": "m"}}))
        evaluated = run_tuner("eval", "--config", "tuner.yaml", "--limit", "2", "--metrics", "faithfulness",
                              cwd=tmp_path, env={"TUNER_LOG_EVERY": "0.5"})
        optimized = run_tuner("optimize", "--config", "tuner.yaml", "--limit", "2", "--trials", "1", "--judge-check",
                              "off", "--search-space", "quick", "--own-cache", cwd=tmp_path,
                              env={"TUNER_LOG_EVERY": "0.5"})
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
        later = bar.add_task("measuring the questions", total=1)  # the embedding's time is its own, not the bars'
        time.sleep(1.2)
        bar.update(later, completed=1)
    with ui.status("hashing the model"):
        time.sleep(0.35)
    lines = log.getvalue().splitlines()
    assert any(re.fullmatch(r"embedding chunks: \d0/40 \([\d.]+/s, about \d+ s left\), 0 s so far", li) for li in lines)
    assert any(re.fullmatch(r"embedding chunks: 40/40 done in [01] s", li) for li in lines), lines
    assert any(re.fullmatch(r"measuring the questions: 1/1 done in 1 s", li) for li in lines), lines
    assert any(re.fullmatch(r"hashing the model: still running, 0 s so far", li) for li in lines), lines


# --- worth fixing while there ------------------------------------------------------------------------------------

def test_a_hub_with_no_route_is_one_line_at_once(tmp_path):
    began = time.monotonic()
    result = run_tuner("models", "install", "qwen2.5-0.5b", "--source", "hub", cwd=tmp_path,
                 env={"HF_ENDPOINT": "http://127.0.0.1:9", "TUNER_MODELS_DIR": str(tmp_path / "models")})
    assert time.monotonic() - began < 30  # huggingface_hub's retries took 24 s and printed 10 lines
    one_line_error(result, "could not be downloaded from http://127.0.0.1:9 (unreachable: Connection refused)")


def test_a_chunk_size_beyond_the_embedder_s_window_is_noted(tmp_path):
    pytest.importorskip("sentence_transformers", reason="needs the embed extra")
    result = run_tuner("eval", "--retrieval-only", "--set", "chunk_size=1000", "--limit", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "note: chunk_size 1000 words is about 1300 tokens, beyond the embedder's window of 256" in result.stderr
    quiet = run_tuner("eval", "--retrieval-only", "--limit", "1", cwd=tmp_path)
    assert "window" not in quiet.stderr, quiet.stderr


def test_a_dead_writer_endpoint_is_refused_before_the_first_trial(tmp_path):
    (tmp_path / "space.yaml").write_text("params:\n  top_k: {type: int, low: 2, high: 5}\n"
                                         "  contextual: {type: categorical, choices: [title, llm]}\n")
    (tmp_path / "dead.yaml").write_text(yaml.safe_dump({"generator": {
        "backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}))
    result = run_tuner("optimize", "--config", "dead.yaml", "--search-space", "space.yaml", "--target", "ndcg@10",
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
        import_labels(source, lambda *args: None)


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
    ran = run_tuner("optimize", "--target", "ndcg@10", "--limit", "3", "--trials", "2", "--search-space", "quick",
              cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    estimated = run_tuner("optimize", "--estimate", "--trials", "5", cwd=tmp_path)
    assert estimated.returncode == 0, estimated.stderr
    assert "study default holds 2 finished trial(s) of the 5 asked: the estimate is for the 3 left" in \
        estimated.stderr
    assert "estimate for 3 trial(s)" in estimated.stdout
