"""The fifth battery of faults (issue 73): outages, endless replies, repeats paid again and the silent cases of the
newer surfaces (own systems, judge alignment, prefix memory, the stop watcher). Each case as a user meets it: what
the command printed, what the study kept, what a local server was asked."""

from __future__ import annotations

import json
import logging
import math
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
import yaml

from tests.fakes import FakeEndpoint, ScriptedLLM, SystemServer
from tests.helpers import one_line_error, open_session, own_answer, run_tuner
from tuner.cache import SqliteStore
from tuner.config import HttpSystemConfig, JudgeAlignment, ProjectConfig
from tuner.errors import ConfigError, DataError
from tuner.study.attrs import COST, DUPLICATE, INTERRUPTED
from tuner.study.results import load_study
from tuner.study.storage import StudyFolder

TESTS = Path(__file__).parent
DEMO = Path(__file__).parents[1] / "tuner" / "data" / "demo"
KNOBS = {"k": {"type": "int", "default": 2}}
SPACE = {"params": {"k": {"type": "int", "low": 1, "high": 2}}}


@pytest.fixture
def own(monkeypatch, tmp_path):
    monkeypatch.setenv("OWN_SYSTEM_CORPUS", str(DEMO / "corpus.jsonl"))
    monkeypatch.delenv("OWN_SYSTEM_CALLS", raising=False)
    monkeypatch.delenv("OWN_SYSTEM_GGUF", raising=False)


def system_study(folder: Path, system: dict, space: dict = SPACE, **project) -> None:
    """sys.yaml (a system over the demo) and space.yaml in `folder`."""
    (folder / "sys.yaml").write_text(yaml.safe_dump({
        "system": {"version": "1", "knobs": KNOBS, **system}, "dataset": {"path": str(DEMO)}, **project}))
    (folder / "space.yaml").write_text(yaml.safe_dump(space))


def optimize(*more: str, limit: int = 3) -> tuple[str, ...]:
    return ("optimize", "--config", "sys.yaml", "--search-space", "space.yaml", "--limit", str(limit), "--holdout",
            "0", "--judge-check", "off", "--study", "s", "--own-cache", "--target", "ndcg@10", *more)


# --- replies that never end ------------------------------------------------------------------------------------

def test_an_http_system_reply_that_trickles_in_is_given_up_after_the_timeout_as_a_whole(tmp_path, own):
    with SystemServer(own_answer, "trickle") as server:
        system_study(tmp_path, {"http": server.url, "timeout": 1})
        started = time.monotonic()
        result = run_tuner(*optimize("--trials", "1"), cwd=tmp_path, timeout=170)
        took = time.monotonic() - started
    one_line_error(result, f"error: system {server.url}, asked question q01 before the first trial: the system did "
                           f"not reply within 1 s (4 tries; raise system.timeout for a slow system)", started=True)
    assert took < 60, took  # 4 tries of 1 s and the backoff: a byte every 0.2 s held it for ever


def test_an_llm_endpoint_reply_that_trickles_in_is_given_up_after_the_timeout_as_a_whole():
    from tuner.models.llms import LLMError
    from tuner.models.llms._openai import OpenAICompatibleLLM

    with FakeEndpoint("trickle") as server:
        llm = OpenAICompatibleLLM(server.url, "m", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"did not answer within 0\.5 s \(4 tries"):
            llm.chat([{"role": "user", "content": "hi"}], max_tokens=5)
        assert time.monotonic() - started < 30
        llm.close()


# --- an outage is not the configuration's failure --------------------------------------------------------------

def test_a_system_that_is_down_stops_the_study_and_the_trial_runs_again_once_it_is_back(tmp_path, own):
    def states() -> list[tuple[str, bool]]:
        trials = load_study(StudyFolder(tmp_path / "studies" / "s")).get_trials(deepcopy=False)
        return [(t.state.name, INTERRUPTED in t.user_attrs) for t in trials if DUPLICATE not in t.user_attrs]

    with SystemServer(own_answer, "503") as server:
        system_study(tmp_path, {"http": server.url}, {"params": {"k": {"type": "int", "low": 1, "high": 3}}})
        down = f"the system at {server.url} answered HTTP 503 (4 tries): restarting: is it down?"
        before = run_tuner(*optimize("--trials", "3"), cwd=tmp_path, timeout=170)
        one_line_error(before, f"error: {down}", started=True)
        assert states() == [("WAITING", False)]  # the baseline is not failed: it waits for the system
        server.mode = "ok"
        assert run_tuner(*optimize("--trials", "1"), cwd=tmp_path).returncode == 0
        server.mode = "503"  # down in the middle of a study: the trial is interrupted, not failed
        during = run_tuner(*optimize("--trials", "3"), cwd=tmp_path, timeout=170)
        one_line_error(during, f"error: {down}", started=True)
        assert states() == [("COMPLETE", False), ("FAIL", True)]
        server.mode = "ok"
        back = run_tuner(*optimize("--trials", "3"), cwd=tmp_path, timeout=170)
    assert back.returncode == 0, back.stderr
    assert sorted(states()) == [("COMPLETE", False)] * 3 + [("FAIL", True)]  # the interrupted one ran again
    report = (tmp_path / "reports" / "s" / "report.md").read_text()
    assert "the baseline trial has not finished" not in report.lower()


def test_a_redirect_is_named_with_its_target_not_followed_as_a_get(own):
    from tuner.systems import Unreachable
    from tuner.systems._http import HttpSystem

    with SystemServer(own_answer, "302") as server:
        with pytest.raises(Unreachable) as raised:
            HttpSystem(HttpSystemConfig(http=server.url, version="1", timeout=5)).ask({"id": "q1", "text": "?"}, {})
    assert str(raised.value) == (f"the system at {server.url} answered HTTP 302, redirecting to {server.url}/v2: set "
                                 f"system.http to the address that answers (tuner does not follow a redirect with a "
                                 f"POST)")
    assert len(server.bodies) == 1  # asked once, by POST (a GET would have no body)


# --- a failed configuration is not paid again -------------------------------------------------------------------

PICKY = """
import json
from tuner.systems import Rejected

def answer(question, params):
    with open("asked.jsonl", "a") as log:
        log.write(json.dumps([question["id"], params["k"]]) + "\\n")
    if params["k"] > 1:
        raise Rejected(f"k={params['k']}: this index serves at most 1 passage")
    return {"answer": "x", "contexts": [{"text": "Velmora is a small island.", "id": "velmora"}]}
"""


def test_a_configuration_the_system_refused_is_not_asked_again_when_the_sampler_proposes_it(tmp_path):
    (tmp_path / "picky.py").write_text(PICKY)
    system_study(tmp_path, {"python": "picky:answer", "knobs": {"k": {"type": "int", "default": 1}}},
                 {"params": {"k": {"type": "int", "low": 1, "high": 3}}})
    result = run_tuner(*optimize("--trials", "8", "--sampler", "random"), cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    asked = [tuple(json.loads(line)) for line in (tmp_path / "asked.jsonl").read_text().splitlines()]
    assert len(asked) == len(set(asked)), asked  # each (question, k) once: a refused k is not asked again
    assert {k for _, k in asked} == {1, 2, 3}
    trials = load_study(StudyFolder(tmp_path / "studies" / "s")).get_trials(deepcopy=False)
    assert any(t.user_attrs.get(DUPLICATE) is not None and t.params["k"] > 1 for t in trials)  # proposed again


# --- settings that change no score, values that never equal themselves ---------------------------------------

def test_a_resume_that_changes_only_the_cut_is_the_same_study(tmp_path, fake_embedder, own, monkeypatch):
    from tuner.study.optimize import project_hash

    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("OWN_SYSTEM_CALLS", str(calls))
    system = {"python": "own_system:answer", "path": TESTS, "version": "1", "knobs": KNOBS}
    assert project_hash(ProjectConfig(system=system, evaluation={"cut": 0.7})) == project_hash(
        ProjectConfig(system=system))
    first = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=3,
                         project=ProjectConfig(cache_dir=tmp_path / "cache", system=system))
    assert first.run(2) == 2
    before = calls.read_text().splitlines()
    again = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=3, project=ProjectConfig(
        cache_dir=tmp_path / "cache", system=system, evaluation={"cut": 0.7}))
    assert again.run(3) == 0  # both configurations ran: the study is done, not begun again under the new cut
    assert calls.read_text().splitlines() == before


FLOAT_KNOB = """
import json

def answer(question, params):
    with open("asked.jsonl", "a") as log:
        log.write(json.dumps([question["id"], repr(params["t"])]) + "\\n")
    return {"answer": "x", "contexts": [{"text": "Velmora is a small island.", "id": "velmora"}]}
"""


def test_a_nan_knob_value_is_one_configuration(tmp_path):
    from tuner.study.optimize import same_values

    assert same_values({"system": {"t": math.nan, "k": 2}}, {"system": {"t": float("nan"), "k": 2}})
    assert not same_values({"t": math.nan}, {"t": 0.5})
    (tmp_path / "fl.py").write_text(FLOAT_KNOB)
    (tmp_path / "sys.yaml").write_text(yaml.safe_dump({
        "system": {"python": "fl:answer", "version": "1", "knobs": {"t": {"type": "float", "default": 0.5}}},
        "dataset": {"path": str(DEMO)}}))
    (tmp_path / "space.yaml").write_text("params: {t: {type: categorical, choices: [.nan, 0.5]}}\n")
    result = run_tuner(*optimize("--trials", "5", "--sampler", "random", limit=2), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    asked = (tmp_path / "asked.jsonl").read_text().splitlines()
    assert sorted(asked) == ['["q01", "0.5"]', '["q01", "nan"]', '["q02", "0.5"]', '["q02", "nan"]']  # each once


def test_a_resume_under_another_answer_layout_is_refused_in_one_line(tmp_path, fake_embedder):
    from tests.helpers import PROGRAMS

    open_session(tmp_path, fake_embedder, PROGRAMS, limit=2).run(1)
    with pytest.raises(ConfigError) as refused:
        open_session(tmp_path, fake_embedder, PROGRAMS, limit=2, project=ProjectConfig(
            cache_dir=tmp_path / "cache", answer_layout="passages-first", evaluation={"verdict_contexts": "numbered"}))
    assert str(refused.value).startswith("study s answered with answer_layout = 'context-first', not "
                                         "'passages-first': its trials' answers were written so")


# --- paths, prints and bad settings ----------------------------------------------------------------------------

def test_best_written_into_another_folder_runs_from_there(tmp_path, own):
    system_study(tmp_path, {"python": "own_system:answer", "path": str(TESTS)})
    (tmp_path / "quiet.py").write_text((TESTS / "own_system.py").read_text())
    (tmp_path / "corpus_bm25.py").write_text((TESTS / "corpus_bm25.py").read_text())  # its retriever
    system_study(tmp_path, {"python": "quiet:answer"})  # system.path unset: the config's folder
    assert run_tuner(*optimize("--trials", "1"), cwd=tmp_path).returncode == 0
    assert run_tuner("best", "--study", "s", "-o", "out/best.yaml", cwd=tmp_path).returncode == 0
    written = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text())
    assert Path(written["system"]["path"]).is_absolute() and Path(written["dataset"]["path"]).is_absolute()
    again = run_tuner("eval", "--config", "out/best.yaml", "--retrieval-only", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


PRINTS = """
print("loading the index")
def answer(question, params):
    print("asked", question["id"])
    return {"answer": "x", "contexts": [{"text": "Velmora is a small island.", "id": "velmora"}]}
"""


def test_a_system_that_prints_leaves_compare_json_parseable(tmp_path):
    (tmp_path / "noisy.py").write_text(PRINTS)
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({
            "system": {"python": "noisy:answer", "version": name}, "dataset": {"path": str(DEMO)}}))
    result = run_tuner("compare", "a.yaml", "b.yaml", "--metric", "ndcg@10", "--limit", "2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["questions"] == 2
    assert "asked q01" in result.stderr


@pytest.mark.parametrize("system, said", [
    ({"http": "http://127.0.0.1:abc/"}, "sys.yaml: system.http: not a URL (Port could not be cast to integer value "
                                        "as 'abc') (got 'http://127.0.0.1:abc/')"),
    ({"http": "http://[127.0.0.1/"}, "sys.yaml: system.http: not a URL (Invalid IPv6 URL) (got 'http://[127.0.0.1/')"),
    ({"python": "own_system:answer", "api_key_env": "TOKEN"}, "api_key_env is a setting of http: systems only"),
])
def test_a_system_setting_that_cannot_work_is_one_config_line(tmp_path, system, said):
    system_study(tmp_path, system)
    result = run_tuner(*optimize("--trials", "1"), cwd=tmp_path)
    one_line_error(result, said)
    assert result.returncode == 2


def test_prefix_memory_beyond_any_machine_is_refused_and_its_docs_say_it_can_change_a_token(tmp_path):
    (tmp_path / "t.yaml").write_text("generator: {model: qwen2.5-0.5b, prefix_memory: 1000000000000}\n")
    result = run_tuner("eval", "--config", "t.yaml", "--limit", "1", cwd=tmp_path)
    one_line_error(result, "error: t.yaml: generator.prefix_memory: Input should be less than or equal to 65536 (got "
                           "1000000000000)")
    docs = " ".join((Path(__file__).parents[1] / "docs" / "configuration.md").read_text().split())
    assert "`prefix_memory` decides the pace, not a token" not in docs
    assert "It can change a token all the same" in docs


def test_a_system_module_that_exits_when_imported_is_one_line(tmp_path):
    (tmp_path / "script.py").write_text("import sys\nsys.exit(3)\n")
    system_study(tmp_path, {"python": "script:answer"})
    result = run_tuner(*optimize("--trials", "1"), cwd=tmp_path)
    one_line_error(result, "system python:script:answer: importing script called sys.exit(3)")
    assert result.returncode == 2


def test_a_null_answer_is_named_as_null():
    from tuner.systems import BadReply, Reply

    with pytest.raises(BadReply) as raised:
        Reply.parse({"answer": None, "contexts": []})
    assert str(raised.value) == "the reply's answer is null, not text; a system that retrieves only is configured " \
                                "with answers: false"
    assert HttpSystemConfig(http="http://127.0.0.1:8000/answer", version="1").http == "http://127.0.0.1:8000/answer"


# --- judge alignment and labels --------------------------------------------------------------------------------

def test_an_alignment_for_another_judge_is_said_and_its_cut_not_used(tmp_path, fake_embedder, caplog):
    from tuner.evaluation.judge.cut import judge_cut

    aligned = JudgeAlignment(prompt="support", labels=40, cut=0.91, judge="gguf:other.gguf:abc:fast")
    evaluation = ProjectConfig(evaluation={"alignment": aligned.model_dump()}).evaluation
    assert judge_cut(evaluation, "gguf:other.gguf:abc", "graded, sentences, aligned").value == 0.91
    cut = judge_cut(evaluation, "gguf:mine.gguf:def:fast", "graded, sentences, aligned")
    assert cut.value == 0.5
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.models.provider import Models
    from tuner.workspace import open_workspace

    project = ProjectConfig(cache_dir=tmp_path / "cache", evaluation={"alignment": aligned.model_dump()})
    llm = ScriptedLLM()
    runner = RagRunner(open_workspace(project, None, 1, embedder=fake_embedder), models=Models(llm, llm))
    with caplog.at_level(logging.WARNING):
        runner.scorer  # noqa: B018 - the first scorer is where the judge meets the alignment
    assert "evaluation.alignment was aligned for the judge gguf:other.gguf:abc:fast, not scripted: its wording and " \
           "demonstrations are shown, its cut is not used" in caplog.text


def test_labels_without_contexts_are_named_before_any_call(tmp_path):
    label = {"key": "a", "question_id": "q1", "question": "?", "answer": "The bridge is red.", "contexts": [],
             "supported": True}
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps({**label, "key": str(n), "supported": n % 2 == 0})
                                                   + "\n" for n in range(10)))
    (tmp_path / "t.yaml").write_text("judge: {model: qwen2.5-0.5b}\n")
    result = run_tuner("judge", "align", "--labels", "labels.jsonl", "--config", "t.yaml", cwd=tmp_path)
    one_line_error(result, "none of the 10 labelled answers has a context")
    with pytest.raises(DataError, match="none of the 10 labelled answers"):
        from tuner.evaluation.judge.cases import label_cases
        from tuner.evaluation.labels import read

        label_cases(read(tmp_path / "labels.jsonl").values())


# --- leases a stopped process left ------------------------------------------------------------------------------

def test_a_lease_a_stopped_process_left_is_taken_at_once_and_a_live_one_is_said(tmp_path, caplog):
    store = SqliteStore(tmp_path / "c.sqlite")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert store.claim("k", f"{socket.gethostname()}:{dead.pid}:1", 30)
    started = time.monotonic()
    with store.lease("k") as hit:
        assert hit is None
    assert time.monotonic() - started < 2  # was up to 30 s in silence
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        holder = f"{socket.gethostname()}:{alive.pid}:1"
        assert store.claim("k", holder, 30)
        threading.Timer(1.0, lambda: store.put("k", {"v": 1})).start()
        with caplog.at_level(logging.WARNING), store.lease("k") as hit:
            assert hit == {"v": 1}
    finally:
        alive.kill()
    assert f"waiting for process {socket.gethostname()}:{alive.pid}, which is asking the same call" in caplog.text


# --- the stop watcher and the objective -------------------------------------------------------------------------

def test_a_trial_the_watcher_marked_is_never_told_finished_and_keeps_what_it_paid():
    from tuner.study import running

    study = optuna.create_study()
    trial = study.ask()
    returned = threading.Event()

    def objective() -> None:  # the native call returns just after the watcher marked the trial
        with running.running(trial, lambda: {"llm_calls": 110, "seconds": 640.0}):
            running.mark_interrupted("SIGTERM")
        returned.set()

    try:
        threading.Thread(target=objective, daemon=True).start()
        assert not returned.wait(1.0)  # held until os._exit: it would tell Optuna of a FAIL trial
        frozen = study.get_trials(deepcopy=False)[0]
        assert frozen.state.name == "FAIL" and frozen.user_attrs[INTERRUPTED] == "SIGTERM"
        assert frozen.user_attrs[COST] == {"llm_calls": 110, "seconds": 640.0}
    finally:
        running._leaving.clear()


# --- what a report says of its judge -----------------------------------------------------------------------------

def test_a_study_judged_by_a_judge_at_chance_on_people_s_labels_says_so(tmp_path, fake_embedder, monkeypatch):
    import dataclasses

    from tests.helpers import PROGRAMS
    from tuner.models.registry import NAMED_MODELS, OnPeople
    from tuner.reports import study_report

    small = NAMED_MODELS["qwen2.5-0.5b"]  # as RAGTruth's 50 test claims measured it (the default setting's now)
    monkeypatch.setitem(NAMED_MODELS, small.name, dataclasses.replace(small, as_judge={
        "graded, sentences, numbered": OnPeople(cut=None, auc=0.42, constructed=0.63, claims=50)}))
    judge = ScriptedLLM("gguf:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf:037fa5a3c28c1932:fast")  # the 0.5B's file
    session = open_session(tmp_path, fake_embedder, PROGRAMS, limit=2, llm=judge)
    session.run(1)
    report = " ".join(study_report(session.folder, tmp_path / "reports").path.read_text().split())
    assert "**Judge warning:** this judge (qwen2.5-coder-0.5b-instruct-q4_k_m.gguf, graded, sentences, numbered) " \
           "ranked 50 " \
           "claims people labelled no better than chance (AUC 0.42; 0.5 is chance): every judged figure here, and " \
           "the stage blamed below, may be the judge's error" in report
    plain = open_session(tmp_path, fake_embedder, PROGRAMS, limit=2, name="plain")
    plain.run(1)
    assert "Judge warning" not in study_report(plain.folder, tmp_path / "reports").path.read_text()


SETTINGS = ("sampled", "graded", "graded, sentences", "graded, sentences, each passage", "graded, sentences, nli",
            "graded, sentences, each passage, nli")


def test_the_judge_check_of_six_settings_keeps_each_row_on_one_line_of_a_200_column_terminal(monkeypatch):
    import io

    from tuner import ui
    from tuner.cli._display import print_judge_checks
    from tuner.evaluation.judge.check import ClassStats, JudgeCheck, MetricCheck

    side = ClassStats(20, 0.81, 0.05, 0.0)
    metric = MetricCheck("faithfulness", side, side, 0.71, 0.6, 0.9, 10, 12.3, auc_interval=(0.55, 0.86), cut=0.84,
                         balanced_accuracy=0.66)
    checks = [JudgeCheck("gguf:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf:037fa5a3c28c1932:fast", "demo", "unsupported",
                         {"faithfulness": metric}, (), setting=setting) for setting in SETTINGS]
    shown = io.StringIO()
    monkeypatch.setattr(ui.console, "_file", shown)
    monkeypatch.setattr(ui.console, "width", 200)
    print_judge_checks(checks)
    lines = [line for line in shown.getvalue().splitlines() if line[:1] in "┏┃┡│└"]  # the tables' own lines
    assert max(map(len, lines)) <= 200
    rows = [line for line in lines if "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" in line]
    assert len(rows) == 2 * len(SETTINGS), "\n".join(lines)  # two tables, a row each, none wrapped
    for setting in SETTINGS:
        assert sum(f" {setting} " in row for row in rows) == 2, setting
    assert any("0.71 [0.55, 0.86]" in row for row in rows) and any("12.3" in row for row in rows)


def test_the_study_s_judge_check_says_what_it_paid_not_cached_while_it_computes(cli_with):
    invoke = cli_with(ScriptedLLM())
    args = ("optimize", "--limit", "3", "--trials", "1", "--search-space", "quick", "--judge-check", "warn")
    first = invoke(*args, "--study", "one")
    assert first.exit_code == 0, first.output
    assert "(cached)" not in first.output
    line = next(line for line in first.output.splitlines() if line.startswith("judge check: faithfulness AUC"))
    paid = int(line.split("(")[1].split()[0])
    assert paid > 0 and line.endswith(f"({paid} judge calls paid, 0 from the cache)"), line
    again = invoke(*args, "--study", "two")  # the same cases through the same cache
    assert f"(0 judge calls paid, {paid} from the cache)" in again.output, again.output


def test_the_http_adapter_refuses_only_a_request_without_a_question_and_serves_a_system_s_own_key_error_as_500():
    from fastapi.testclient import TestClient

    from tuner.systems.adapters import http_app

    def broken(question, params):
        return {"answer": params["missing"], "contexts": []}  # the system's own bug: a KeyError

    client = TestClient(http_app(broken))
    asked = client.post("/", json={"question": {"id": "q1", "text": "?"}, "params": {}})
    assert (asked.status_code, asked.json()) == (500, {"detail": "KeyError: 'missing'"})  # was 400: "refused knobs"
    lacking = client.post("/", json={"params": {}})
    assert (lacking.status_code, lacking.json()) == (400, {"detail": "the request lacks 'question'"})


def test_a_defect_with_a_message_of_several_lines_and_no_writable_temp_folder_is_still_one_line(cli_with, monkeypatch,
                                                                                               capsys, tmp_path):
    from types import SimpleNamespace

    from tuner.cli import main
    from tuner.errors import INTERNAL_ERROR

    cli_with(ScriptedLLM())

    def defect(objective, trial):
        raise ZeroDivisionError("a defect of tuner's own\nwith a second line\nand a third")

    monkeypatch.setattr("tuner.study.optimize.Objective.__call__", defect)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "nowhere"))  # its traceback file cannot be written
    monkeypatch.setattr(sys, "argv", ["tuner", "optimize", "--limit", "2", "--trials", "1", "--study", "d",
                                      "--judge-check", "off", "--search-space", "quick"])
    with pytest.raises(SystemExit) as ended:
        main()
    stderr = capsys.readouterr().err
    assert "second line" not in stderr and "Traceback" not in stderr, stderr
    line = one_line_error(SimpleNamespace(returncode=ended.value.code, stderr=stderr),
                          "internal error: ZeroDivisionError: a defect of tuner's own — a defect in tuner",
                          "please report it with this line (its traceback could not be written: ", started=True)
    assert ended.value.code == INTERNAL_ERROR and line.endswith("No such file or directory)")
