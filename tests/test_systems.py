"""The user's own system under a study (`system:`): a Python function or an HTTP endpoint, its own knobs searched,
its replies judged, cached and resumed like tuner's own pipeline's, and every bad reply said in one line. The judge
here is scripted (plumbing); tests/test_systems_real.py runs a real system and judge."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.fakes import CHAT, FakeEndpoint, SystemServer
from tests.helpers import StrictIsUnfaithful, one_line_error, open_session, own_answer, tuner
from tuner.config import ProjectConfig, PythonSystemConfig
from tuner.data import load_dataset
from tuner.errors import ConfigError
from tuner.evaluation.retrieval_metrics import ndcg_at
from tuner.evaluation.system_answerer import SystemAnswerer
from tuner.study.attrs import DUPLICATE
from tuner.study.space import SearchSpace, load_space

TESTS = Path(__file__).parent
DEMO = Path(__file__).parents[1] / "tuner" / "data" / "demo"
KNOBS = {"k": {"type": "int", "default": 2}, "prompt": {"type": "str", "default": "plain"}}
SPACE = {"params": {"k": {"type": "int", "low": 1, "high": 4}, "prompt": {"type": "categorical",
                                                                         "choices": ["plain", "quote"]}}}


@pytest.fixture
def own(monkeypatch, tmp_path):
    """The test system's settings: the demo corpus, and a call log (one JSON line per reply it gave)."""
    monkeypatch.setenv("OWN_SYSTEM_CORPUS", str(DEMO / "corpus.jsonl"))
    monkeypatch.setenv("OWN_SYSTEM_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("OWN_SYSTEM_GGUF", raising=False)
    return tmp_path / "calls.jsonl"


def calls(log: Path) -> list[tuple[str, str]]:
    """(question id, knobs) of every reply the system gave."""
    if not log.exists():
        return []
    return [(c["id"], json.dumps(c["params"], sort_keys=True)) for c in map(json.loads, log.read_text().splitlines())]


def python_project(tmp_path, **system) -> ProjectConfig:
    return ProjectConfig(cache_dir=tmp_path / "cache", system={
        "python": "own_system:answer", "path": TESTS, "version": "1", "knobs": KNOBS, **system})


def test_a_python_system_is_tuned_over_its_own_knobs_and_a_resume_asks_it_nothing_twice(tmp_path, fake_embedder,
                                                                                      own):
    session = open_session(tmp_path, fake_embedder, SPACE, targets=("faithfulness",), limit=6,
                           project=python_project(tmp_path))
    assert session.run(4) == 4
    files = [session.folder.read_trial(n) for n in range(4)]
    assert files[0].pipeline["system"] == {"k": 2, "prompt": "plain"}  # trial 0: the declared defaults
    for file in files:  # each trial's knobs reached the system, and its contexts are the system's
        assert file.pipeline["system"] == {**{"k": 2, "prompt": "plain"}, **file.params}
        asked = json.dumps(file.pipeline["system"], sort_keys=True)
        assert {q.id for q in file.result.questions} <= {qid for qid, knobs in calls(own) if knobs == asked}
        assert all(len(q.contexts) == file.pipeline["system"]["k"] for q in file.result.questions)
        assert file.result.models["system"] == "python:own_system:answer version 1"
        assert file.result.value("faithfulness") is not None
    before = calls(own)
    assert len(before) == len(set(before))  # four configurations, each question asked once
    again = open_session(tmp_path, fake_embedder, SPACE, limit=6, project=python_project(tmp_path))
    assert again.run(6) == 2
    after = calls(own)
    assert len(after) == len(set(after)) and after[:len(before)] == before


def test_system_knobs_and_settings_are_checked_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="a system names exactly one kind: python: module:function or http: URL"):
        ProjectConfig(system={"python": "a:b", "http": "http://x", "version": "1"})
    with pytest.raises(ValueError, match="a system names exactly one kind"):
        ProjectConfig(system={"version": "1"})
    with pytest.raises(ValueError, match="expected int, got 'two'"):
        PythonSystemConfig(python="a:b", version="1", knobs={"k": {"type": "int", "default": "two"}})
    with pytest.raises(ValueError, match="system knob 'top_n' is not declared under system.knobs"):
        ProjectConfig(system={"python": "a:b", "version": "1", "knobs": KNOBS}, pipeline={"system": {"top_n": 3}})
    with pytest.raises(ValueError, match="no system: is configured"):
        ProjectConfig(pipeline={"system": {"k": 3}})
    system = PythonSystemConfig(python="a:b", version="1", knobs=KNOBS)
    own = ProjectConfig(system=system.model_dump())
    assert SearchSpace.of(SPACE, own).system == system and not SearchSpace.of(SPACE, own).pipeline_knobs
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"params": {"top_k": {"type": "int", "low": 1, "high": 3}}}))
    with pytest.raises(ConfigError, match="params.top_k: a knob of tuner's built-in pipeline, which system "
                                          "python:a:b does not run"):
        load_space(tmp_path / "s.yaml", own)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"params": {"k": {"type": "float", "low": 0.5, "high": 3}}}))
    with pytest.raises(ConfigError, match="params.k: 0.5 is not a value the system's k takes"):
        load_space(tmp_path / "s.yaml", own)
    named = PythonSystemConfig(python="a:b", version="1", knobs={**KNOBS, "top_k": {"type": "int", "default": 5}})
    space = SearchSpace.of({"params": {"top_k": {"type": "int", "low": 1, "high": 3}}},
                           ProjectConfig(system=named.model_dump()))  # declared: its own
    assert space.params["top_k"].high == 3
    # the builtin pipeline's own spaces are as before
    assert load_space(Path(__file__).parents[1] / "search_spaces" / "quick.yaml").pipeline_knobs


def write_config(folder: Path, system: dict, **project) -> None:
    (folder / "sys.yaml").write_text(yaml.safe_dump({
        "system": {"version": "1", "knobs": KNOBS, **system}, "dataset": {"path": str(DEMO)}, **project}))
    (folder / "space.yaml").write_text(yaml.safe_dump(SPACE))


def optimize(limit: int = 3) -> tuple[str, ...]:
    return ("optimize", "--config", "sys.yaml", "--search-space", "space.yaml", "--limit", str(limit), "--holdout",
            "0", "--judge-check", "off", "--study", "s", "--own-cache")


OPTIMIZE = optimize()


@pytest.mark.parametrize("entry, said", [
    ("nowhere:answer", "system python:nowhere:answer: no module 'nowhere' in"),
    ("own_system:answers", "system python:own_system:answers: module own_system has no 'answers'"),
    ("json:dumps", "system python:json:dumps: dumps(obj, *, skipkeys=False"),
])
def test_an_entry_point_that_does_not_import_or_has_the_wrong_signature_is_one_line(tmp_path, entry, said):
    write_config(tmp_path, {"python": entry, "path": str(TESTS)})
    result = tuner(*OPTIMIZE, "--target", "ndcg@10", "--trials", "1", cwd=tmp_path)
    line = one_line_error(result, said)
    if entry == "json:dumps":
        assert "cannot be called as dumps(question, params)" in line
    assert result.returncode == 2


#: what the tests' HTTP system does wrong on purpose
MODES = ("not json", "no answer", "text context", "500")


#: a reply of a shape tuner cannot read, as each is said
SHAPES = {
    "not json": "the reply is not JSON ('<html>Bad Gateway</html>')",
    "no answer": "the reply lacks 'answer' (it has 'contexts', 'usage'); a system that retrieves only is configured "
                 "with answers: false",
    "text context": "context 1 of the reply is int, not text (a context is text, or an object with text and id)",
}


@pytest.mark.parametrize("mode", SHAPES)
def test_a_reply_of_a_shape_tuner_cannot_read_is_one_line_before_the_first_trial(tmp_path, own, mode):
    """The wrong shape, as `tuner optimize` prints it: the system asked once (the first search question, the
    baseline's knobs), no trial run, exit 2 — not every question of every trial paid for and failed."""
    with SystemServer(own_answer, mode) as server:
        write_config(tmp_path, {"http": server.url})
        result = tuner(*OPTIMIZE, "--target", "faithfulness", "--trials", "2", cwd=tmp_path)
        asked = len(server.bodies)
    assert result.returncode == 2, result.stderr
    assert one_line_error(result, started=True) == (
        f"error: system {server.url}, asked question q01 before the first trial: {SHAPES[mode]}")
    assert asked == 1


def test_a_trial_whose_replies_change_shape_stops_at_its_first_question(tmp_path, fake_embedder, own):
    """Trial 0 reads the baseline's replies; a later trial's knobs make the system answer in another shape: that
    trial stops at its first question (one reply paid for), fails naming it, and the study goes on."""
    with SystemServer(own_answer) as server:
        project = ProjectConfig(cache_dir=tmp_path / "cache", system={"http": server.url, "version": "1",
                                                                      "knobs": KNOBS})
        session = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=6, project=project,
                               baseline={"k": 2, "prompt": "plain"})
        assert session.run(1) == 1
        before = len(server.bodies)
        server.mode = "no answer"
        session.run(2)
        asked = len(server.bodies) - before
    ran = [t for t in session.study.trials[1:] if DUPLICATE not in t.user_attrs]
    assert [t.state.name for t in ran] == ["FAIL"] and asked == 1  # one reply paid for, not six
    assert ran[0].user_attrs["error"] == (f"question q01: {SHAPES['no answer']}; a reply of this shape cannot be "
                                          f"scored, so the trial stops at its first question")


@pytest.mark.parametrize("mode, said", [
    ("500", "question q01: the system answered HTTP 500 (4 tries): KeyError: 'embedding'"),
    ("slow", "question q01: the system did not reply within 0.3 s (4 tries; raise system.timeout for a slow "
             "system)"),
    ("python raises", "question q01: the system raised KeyError: 'embedding'"),
    ("python slow", "question q01: the system did not reply within 0.3 s (raise system.timeout for a slow system)"),
])
def test_a_bad_reply_fails_its_question_in_one_line_naming_it(tmp_path, own, monkeypatch, mode, said):
    """As printed by `tuner optimize` (the judge a local scripted endpoint): each question's bad reply is one line
    naming it, the trial fails with the cause in one line, and the study ends as usual, its report written."""
    with SystemServer(own_answer, mode if mode in MODES else "ok", delay=1.0 if mode == "slow" else 0) as server, \
            FakeEndpoint("scripted", delay=0) as judge:
        model = {"backend": "openai-compatible", "base_url": judge.url, "model": "m"}
        system = {"http": server.url} if not mode.startswith("python") else {
            "python": "own_system:broken" if mode == "python raises" else "own_system:answer", "path": str(TESTS)}
        write_config(tmp_path, {**system, "timeout": 0.3}, judge=model, generator=model)
        if mode == "python slow":
            monkeypatch.setenv("OWN_SYSTEM_DELAY", "1")  # the tuner child inherits it
        result = tuner(*OPTIMIZE, "--target", "faithfulness", "--trials", "1", cwd=tmp_path)
    warned = [line for line in result.stderr.splitlines() if line.startswith("question q0")]
    assert len(warned) == 3, result.stderr  # each question once
    assert warned[0].startswith(said) and (mode == "slow" or warned[0] == said), warned
    assert "Traceback" not in result.stderr
    assert "no question could be scored on faithfulness (faithfulness: 3 system" in result.stderr
    assert (tmp_path / "reports" / "s" / "report.md").exists()


def test_a_system_that_rejects_a_parameter_fails_that_trial_and_the_study_goes_on(tmp_path, fake_embedder, own):
    with SystemServer(own_answer, "400") as server:
        project = ProjectConfig(cache_dir=tmp_path / "cache", system={"http": server.url, "version": "1",
                                                                      "knobs": KNOBS})
        session = open_session(tmp_path, fake_embedder, SPACE, limit=3, project=project)
        session.run(2)
    trials = session.study.trials
    assert [t.state.name for t in trials] == ["FAIL", "FAIL"]
    assert trials[0].user_attrs["error"] == (f"system {server.url} refused the knobs k=2, prompt=plain: k=2 is more "
                                             f"than this index holds (HTTP 400)")  # the system's words, said as its
    # a Python system says so by raising Rejected: the trials it refuses fail, the ones it takes complete
    picky = open_session(tmp_path, fake_embedder, SPACE, limit=3, name="picky",
                         project=python_project(tmp_path, python="own_system:picky"))
    picky.run(4)
    states = {t.params.get("k", 2): t.state.name for t in picky.study.trials if DUPLICATE not in t.user_attrs}
    assert states[2] == "FAIL" and all(state == ("COMPLETE" if k == 1 else "FAIL") for k, state in states.items())
    assert picky.study.trials[0].user_attrs["error"] == ("system python:own_system:picky refused the knobs k=2, "
                                                         "prompt=plain: k=2: this index serves at most 1 passage")


def test_an_http_system_waits_out_a_429_and_answers_with_its_concurrency(tmp_path, fake_embedder, own):
    with SystemServer(own_answer, "429 once", delay=0.2) as server:
        project = ProjectConfig(cache_dir=tmp_path / "cache", system={"http": server.url, "version": "1",
                                                                      "knobs": KNOBS, "concurrency": 4})
        session = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=8, project=project)
        assert session.run(1) == 1
    assert len(server.bodies) == 9  # the refused request asked again, once
    result = session.folder.read_trial(0).result
    assert [q.id for q in result.questions] == [q.id for q in session.search_questions]  # in question order
    assert result.value("ndcg@10") is not None


def test_an_id_target_reads_the_system_s_context_ids_and_is_refused_when_it_has_none(tmp_path, fake_embedder, own):
    session = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=6,
                           project=python_project(tmp_path))
    assert session.run(2) == 2
    result = session.folder.read_trial(0).result
    data = load_dataset(DEMO, "auto", 6)
    gold = {q.id: set(q.relevant_ids) for q in data.questions}
    first = result.questions[0]
    assert first.retrieval.gold_ids and set(first.retrieval.gold_ids) == gold[first.id]
    ids = [p.doc_id for p in first.selected]  # the system's contexts, in its order, by the ids it gave
    assert first.retrieval.metrics["ndcg@10"] == pytest.approx(ndcg_at(list(dict.fromkeys(ids)), gold[first.id], 10))
    assert 0 < result.value("ndcg@10") <= 1
    bare = python_project(tmp_path, knobs={**KNOBS, "ids": {"type": "bool", "default": False}})
    without = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=6, project=bare, name="bare")
    with pytest.raises(ConfigError, match=r"--target ndcg@10: the contexts system python:own_system:answer "
                                          r"returned for question q0\d carry no document id"):
        without.run(1)
    assert without.discarded and not without.folder.root.exists()  # refused before trial 0: nothing kept


def test_context_ids_that_name_no_document_are_said_before_the_first_trial(tmp_path, fake_embedder, own, caplog):
    """A framework's own node ids (LlamaIndex documents built without `id_`) would give every id metric 0 in every
    trial of a study that "completes": refused before trial 0, the system asked once. Some foreign ids: a warning."""
    nodes = python_project(tmp_path, knobs={**KNOBS, "ids": {"type": "str", "default": "nodes"}})
    session = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=6, project=nodes, name="nodes")
    with pytest.raises(ConfigError) as caught:
        session.run(1)
    said = str(caught.value)
    assert said.startswith("--target ndcg@10: 2 of the 2 context ids system python:own_system:answer returned for "
                           "question q0")
    assert "('node-" in said and "name no document of the dataset (its ids look like " in said
    assert said.endswith("so every id metric would be 0; return each context's source document id (a LangChain "
                         "Document's metadata key, a LlamaIndex node's ref_doc_id), or choose a judged target")
    assert len(calls(own)) == 1  # asked once, with the baseline's knobs
    assert session.discarded and not session.folder.root.exists()  # refused before trial 0: nothing kept
    first = python_project(tmp_path, knobs={**KNOBS, "ids": {"type": "str", "default": "first"}})
    session = open_session(tmp_path, fake_embedder, SPACE, targets=("ndcg@10",), limit=6, project=first, name="first")
    with caplog.at_level("WARNING"):
        assert session.run(1) == 1
    assert any("1 of the 2 context ids system python:own_system:answer returned for question" in r.message and
               "they count as never relevant" in r.message for r in caplog.records)


def test_a_study_refuses_to_resume_under_another_version(tmp_path, fake_embedder, own):
    open_session(tmp_path, fake_embedder, SPACE, limit=3, project=python_project(tmp_path)).run(1)
    with pytest.raises(ConfigError, match="study s tuned system python:own_system:answer version 1, not system "
                                          "python:own_system:answer version 2"):
        open_session(tmp_path, fake_embedder, SPACE, limit=3, project=python_project(tmp_path, version="2"))
    other_default = {**KNOBS, "prompt": {"type": "str", "default": "quote"}}
    with pytest.raises(ConfigError, match=r"study s declared the knobs k \(int, default 2\), prompt \(str, default "
                                          r"'plain'\), not k \(int, default 2\), prompt \(str, default 'quote'\)"):
        open_session(tmp_path, fake_embedder, SPACE, limit=3, project=python_project(tmp_path, knobs=other_default))


def test_a_contexts_only_system_serves_retrieval_targets_and_refuses_answer_targets(tmp_path, fake_embedder, own):
    with pytest.raises(ConfigError, match="--target/--constraint faithfulness: system python:own_system:answer "
                                          "returns contexts only"):
        open_session(tmp_path, fake_embedder, SPACE, limit=3, project=python_project(tmp_path, answers=False))
    session = open_session(tmp_path, fake_embedder, SPACE, targets=("recall@5",), limit=3, name="r",
                           project=python_project(tmp_path, answers=False))
    assert session.run(1) == 1


def test_a_judged_study_of_a_system_gives_its_verdict_and_report(tmp_path, fake_embedder, own):
    """The held-out verdict and the report read a system's trials as they read the pipeline's."""
    from tuner.analysis.verdict import give_verdict
    from tuner.reports import write_report
    from tuner.study.results import read_study

    project = python_project(tmp_path)
    project = project.model_copy(update={"dataset": project.dataset.model_copy(update={"holdout": 0.5})})
    session = open_session(tmp_path, fake_embedder, SPACE, limit=8, project=project, llm=StrictIsUnfaithful())
    session.run(3)
    view = give_verdict(read_study(session.folder), session.runner())
    best = view.best
    assert best.held_out is not None and best.held_out.models["system"] == "python:own_system:answer version 1"
    assert {q.id for q in best.held_out.questions} == {q.id for q in session.split.holdout(session.dataset.questions)}
    text = write_report(view, tmp_path / "report").path.read_text()
    assert "held-out" in text.lower() and "prompt" in text
    assert "| system | python:own_system:answer version 1 (your own: it retrieves and answers; tuner judges) |" in text


# --- nothing lost: kill -9, Ctrl-C and SIGTERM mid-study ------------------------------------------------------------

def test_kill_9_mid_study_then_a_resume_asks_the_system_no_question_twice(tmp_path, own, monkeypatch):
    """The system's own call log is the count: every (question, knobs) it answered before the kill is answered
    from the cache on resume."""
    import os
    import signal
    import time

    from tests.helpers import started

    monkeypatch.setenv("OWN_SYSTEM_DELAY", "0.15")
    write_config(tmp_path, {"python": "own_system:answer", "path": str(TESTS)})
    args = (*optimize(8), "--target", "ndcg@10", "--trials", "6")
    process = started([sys.executable, "-m", "tuner", *args], tmp_path)
    deadline = time.monotonic() + 120
    while len(calls(own)) < 12 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    before = calls(own)
    assert 12 <= len(before) < 48, len(before)  # killed mid-study
    again = tuner(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = calls(own)
    assert len(after) == len(set(after)), [c for c in after if after.count(c) > 1]
    assert len(after) > len(before)


@pytest.mark.parametrize("number", ["SIGINT", "SIGTERM"])
def test_replies_that_arrive_while_tuner_stops_are_kept(tmp_path, own, number):
    """Eight questions in flight at an HTTP system that answers 0.5 s after each request; the stop comes as the
    eighth arrives, so the replies reach tuner while it stops. The run again asks the system for none of them
    (counted by request body at the system)."""
    import signal
    import time

    from tests.helpers import interruptible, signal_when

    number = getattr(signal, number)
    with SystemServer(own_answer, delay=0.5) as server:
        write_config(tmp_path, {"http": server.url, "concurrency": 8})
        args = (*optimize(10), "--target", "ndcg@10", "--trials", "1")
        process = interruptible([sys.executable, "-m", "tuner", *args], tmp_path)
        stderr, took = signal_when(process, lambda: len(server.bodies) >= 9, number)  # q1 once before trial 0
        left = time.monotonic()
        assert process.returncode == 128 + number and "Traceback" not in stderr, stderr
        # tuner leaves once its calls in flight are done (within 1.5 s of the signal): each reply sent before then was
        # read and cached
        answered = {body for body, at in server.answered if at < left}
        asked = len(server.bodies)
        again = tuner(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(answered) >= 8 and took < 1.5, (len(answered), took)
    assert not answered & set(server.bodies[asked:])


def test_proposals_over_a_system_s_knobs_extend_fix_and_leave_the_stages_to_the_user():
    """--rounds over an own system: a best value on a range's edge extends it (a system knob has no hard limit of
    tuner's), a knob that moves nothing is fixed, and a limiting stage is advice, never one of tuner's knobs."""
    from types import SimpleNamespace

    from tests.helpers import question
    from tuner.analysis.importance import KnobEffect
    from tuner.analysis.propose import next_space, propose
    from tuner.analysis.stages import attribute

    system = PythonSystemConfig(python="a:b", version="1", knobs={**KNOBS, "top_k": {"type": "int", "default": 100}})
    project = ProjectConfig(system=system.model_dump())
    space = SearchSpace.of({"params": {**SPACE["params"], "top_k": {"type": "int", "low": 90, "high": 100}}}, project)
    view = SimpleNamespace(space=space, project=project, name="s", best=SimpleNamespace(
        params={"k": 4, "prompt": "plain", "top_k": 100}, pipeline={}, result=None, number=3))
    flat = KnobEffect("prompt", "all trials", 12, 0.01, (("plain", 0.5, 6), ("quote", 0.5, 6)), None)
    generation = attribute([question(f"g{i}", 0.0) for i in range(3)], "faithfulness")
    proposals = propose(view, [flat], generation)
    by_knob = {p.knob: p for p in proposals if p.in_space}
    assert (by_knob["k"].kind, by_knob["k"].param.low, by_knob["k"].param.high) == ("extend", 2, 6)
    assert (by_knob["top_k"].kind, by_knob["top_k"].param.high) == ("extend", 105)  # past tuner's top_k limit 100
    assert by_knob["prompt"].kind == "fix"
    assert set(by_knob) == {"k", "top_k", "prompt"}  # no reranker, program or index knob of tuner's
    advice = [p.change for p in proposals if not p.in_space]
    assert advice == ["look at your system's generation: declare a knob of it under system.knobs and search it"]
    nxt = next_space(space, proposals, view.best.params, "s")
    assert nxt.system == system and nxt.params["k"].high == 6


def test_compare_gates_two_settings_of_a_system_as_it_gates_two_pipelines(tmp_path, own):
    """`tuner compare` on two configs of one system (k 1 vs 4): evaluated through the shared cache, compared
    question by question; the second run asks the system nothing."""
    for name, k in (("base", 1), ("new", 4)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({
            "system": {"python": "own_system:answer", "path": str(TESTS), "version": "1", "knobs": KNOBS},
            "pipeline": {"system": {"k": k}}, "dataset": {"path": str(DEMO)}}))
    args = ("compare", "base.yaml", "new.yaml", "--metric", "recall@5", "--limit", "8", "--json")
    first = tuner(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    asked = len(calls(own))
    assert asked == 16  # eight questions, two settings
    gate = json.loads(first.stdout)
    assert "recall@5" in json.dumps(gate)
    assert gate.pop("llm_calls_paid") == {"base": 8, "new": 8}  # the system's replies, counted as calls
    again = tuner(*args, cwd=tmp_path)
    rerun = json.loads(again.stdout)
    assert again.returncode == 0 and rerun.pop("llm_calls_paid") == {"base": 0, "new": 0} and rerun == gate
    assert len(calls(own)) == asked


def test_eval_asks_a_system_with_its_declared_knobs_where_the_config_sets_none(tmp_path, own):
    """`tuner eval` asks with what a study's trial 0 asks with: every declared knob, at the config's value or its
    default (it passed `{}` and the user's code raised KeyError). `--set` still sets tuner's own knobs alone."""
    write_config(tmp_path, {"python": "own_system:answer", "path": str(TESTS)}, pipeline={"system": {"k": 3}})
    result = tuner("eval", "--config", "sys.yaml", "--limit", "2", "--retrieval-only", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert calls(own) == [(q, json.dumps({"k": 3, "prompt": "plain"})) for q in ("q01", "q02")]


def test_compare_on_a_metric_neither_run_could_score_fails_instead_of_passing(tmp_path, own):
    """Contexts without ids give no recall@5: a gate on no data must not say "no regression" and exit 0."""
    for name, k in (("base", 1), ("new", 4)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({
            "system": {"python": "own_system:answer", "path": str(TESTS), "version": "1",
                       "knobs": {**KNOBS, "ids": {"type": "bool", "default": False}}},
            "pipeline": {"system": {"k": k}}, "dataset": {"path": str(DEMO)}}))
    result = tuner("compare", "base.yaml", "new.yaml", "--metric", "recall@5", "--limit", "3", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == ("no data: recall@5 scored on no question of both runs: the gate "
                                                      "cannot pass on no data (exit 1)")
    assert "no regression" not in result.stdout


@pytest.mark.parametrize("thread_safe", [False, True])
def test_a_python_system_is_asked_one_question_at_a_time_unless_it_says_it_is_thread_safe(thread_safe):
    """concurrency: 4 on a function with shared state: each question must get its own retrieval. Only a system that
    declares `thread_safe: true` is called from several threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    from tuner.cost import CostMeter
    from tuner.systems import AskedSystem, make_system

    config = PythonSystemConfig(python="shared_state_system:answer", path=TESTS, version="1", concurrency=4,
                                thread_safe=thread_safe)
    asked = AskedSystem(config, make_system(config), None, CostMeter())
    shared = sys.modules["shared_state_system"]  # the module the system imported
    shared.in_call["most"] = 0
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda n: asked.reply(f"q{n}", f"question {n}", {}), range(8)))
    mixed = [r.answer for n, r in enumerate(replies) if r.answer != f"about question {n}"]
    assert (shared.in_call["most"] > 1) == thread_safe
    if not thread_safe:
        assert mixed == []  # tuner serialised the calls
    assert config.at_once == (4 if thread_safe else 1)
    notes = SystemAnswerer.notes(ProjectConfig(system=config.model_dump()))
    assert notes == ([] if thread_safe else [
        "system python:shared_state_system:answer is asked one question at a time, whatever its concurrency (4) "
        "says: it does not say it is thread-safe (set system.thread_safe: true if calls share no state)"])


def test_an_adapter_builds_once_per_knob_values_when_questions_are_asked_at_once():
    """Eight questions at once with the same knobs build the chain once (it was built by every asker that found it
    missing, and the eviction could race)."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tuner.systems.adapters import _built

    builds, lock = [], threading.Lock()

    def build(params):
        with lock:
            builds.append(dict(params))
        time.sleep(0.05)  # a chain or an index takes a while to make
        return object()

    get = _built(build)
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda n: get({"k": n % 2}), range(16)))
    assert sorted(b["k"] for b in builds) == [0, 1]
    assert len({id(m) for m in made}) == 2


@pytest.mark.parametrize("chain, found", [
    ("lcel", "the retrievers inside the call (LangChain's callbacks)"),
    ("created", "the chain's output 'context'"),
    ("qa", "the retrievers inside the call (LangChain's callbacks)"),
    ("agent", "tool retrieve_context's artifact (LangChain's callbacks)"),
])
def test_langchain_chains_as_its_docs_write_them_answer_with_their_retrievers_documents(own, chain, found):
    """The tutorial's string chain, `create_retrieval_chain` ({"input": …}), `RetrievalQA` ({"query": …}, no
    documents in its output) and the tutorial's agent ({"messages": …}; its tool searches a store, no retriever, and
    returns the documents as its artifact): each asked as it takes a question, its contexts the documents its
    retriever or tool returned, with their source ids. (The tutorial's chain failed every question: `the reply lacks
    'contexts'`.)"""
    sys.path.insert(0, str(TESTS))
    import langchain_tutorial

    system = getattr(langchain_tutorial, chain)
    reply = system({"id": "q01", "text": "What is the capital of Velmora?"}, {"k": 3, "prompt": "short"})
    assert reply["answer"] == "The capital is Port Ardent."
    ids = [c["id"] for c in reply["contexts"]]
    assert len(ids) == 3 and "port-ardent" in ids and reply["contexts_from"] == found
    assert all(c["text"] for c in reply["contexts"])
    assert len(system({"id": "q01", "text": "What is the capital of Velmora?"}, {"k": 1, "prompt": "short"})
               ["contexts"]) == 1  # the knob reaches the retriever


def test_a_document_a_retriever_tool_reports_twice_is_one_context():
    """A retriever called by a tool reports its documents as it ends, and the tool again as its artifact."""
    from langchain_core.documents import Document
    from langchain_core.messages import ToolMessage

    from tuner.systems.adapters import _retrieved

    docs = [Document(page_content="Port Ardent is the capital.", metadata={"source": "port-ardent"})]
    seen = _retrieved()
    seen.on_retriever_end(docs)
    seen.on_tool_end(ToolMessage(content="Port Ardent is the capital.", artifact=docs, tool_call_id="1"))
    seen.on_tool_end(ToolMessage(content="no documents", artifact={"score": 1}, tool_call_id="2"))
    assert seen.documents == docs


def test_a_command_that_is_not_there_is_one_line_before_any_trial(tmp_path):
    write_config(tmp_path, {"command": "no-such-program --serve"})
    missing = tuner(*OPTIMIZE, "--target", "ndcg@10", "--trials", "1", cwd=tmp_path)
    assert one_line_error(missing) == (f"error: system command:no-such-program --serve: no program 'no-such-program' "
                                       f"on PATH or in {tmp_path}")


@pytest.mark.parametrize("change, said", [
    ({"request": {"message": "{questoin}"}},
     "system: request: {questoin} names no knob and is not {question} or {question_id} (knobs: k, prompt)"),
    ({"response": {"contexts": "sources"}},
     "system: response: give the answer's path (response.answer), or answers: false for a service that returns "
     "contexts only"),
    ({"method": "GET", "request": {"q": {"text": "{question}"}}},
     "system: request: a GET sends its fields as the query string, so its request is one flat mapping"),
])
def test_a_bad_template_or_path_is_one_line(tmp_path, change, said):
    write_config(tmp_path, {"http": "http://127.0.0.1:9/chat", **CHAT, **change})
    result = tuner(*OPTIMIZE, "--target", "ndcg@10", "--trials", "1", cwd=tmp_path)
    assert one_line_error(result).endswith(said)


def test_a_reply_without_a_path_s_field_says_which_step_is_missing(monkeypatch):
    from tuner.config import HttpSystemConfig
    from tuner.systems import BadShape
    from tuner.systems._http import _read

    paths = HttpSystemConfig(http="http://x/", version="1", knobs=KNOBS, **CHAT).response
    with pytest.raises(BadShape) as caught:
        _read({"reply": "yes", "docs": []}, paths)
    assert str(caught.value) == ("the reply has no 'sources' (system.response.contexts; at 'sources' it has 'reply', "
                                 "'docs')")
    assert _read({"reply": "yes", "sources": [{"content": "t", "doc": 7}]}, paths) == {
        "answer": "yes", "contexts": [{"text": "t", "id": 7}],
        "contexts_from": "the reply's 'sources' (system.response.contexts)"}


def test_system_check_shows_what_tuner_read_and_what_to_change(tmp_path, own):
    """`tuner system check` as printed: one question asked with the defaults, each context's id and whether the
    dataset names it, and the fix for what a study could not score."""
    write_config(tmp_path, {"python": "own_system:answer", "path": str(TESTS)})
    ready = tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
    assert ready.returncode == 0, ready.stderr
    lines = ready.stdout.splitlines()
    assert lines[0] == "system python:own_system:answer version 1, asked q01 ('What is the capital of Velmora?') " \
                       "with k=2, prompt='plain'"
    assert lines[1].startswith("answer: ") and lines[-1] == "ready: an answer, contexts and document ids a study " \
                                                           "can score"
    rows = [line for line in lines if line.startswith("│ ")]
    assert len(rows) == 2 and "│ velmora " in "".join(rows) and len(calls(own)) == 1
    write_config(tmp_path, {"python": "own_system:answer", "path": str(TESTS),
                            "knobs": {**KNOBS, "ids": {"type": "str", "default": "nodes"}}})
    nodes = tuner("system", "check", "--config", "sys.yaml", "--question", "q02", cwd=tmp_path)
    assert nodes.returncode == 0 and nodes.stdout.splitlines()[-1].startswith(
        "unknown: 2 id(s) name no document of the dataset (e.g. 'node-")
    with SystemServer(own_answer, "no answer") as server:
        write_config(tmp_path, {"http": server.url})
        bad = tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
    assert bad.returncode == 2 and one_line_error(bad) == (
        f"error: system {server.url}, asked question q01: {SHAPES['no answer']}")
    write_config(tmp_path, {"python": "langchain_tutorial:lcel", "path": str(TESTS), "knobs": {
        "k": {"type": "int", "default": 2}, "prompt": {"type": "str", "default": "short"}}})
    chain = tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
    assert chain.returncode == 0, chain.stderr
    assert "2 context(s), from the retrievers inside the call (LangChain's callbacks)" in chain.stdout
    (tmp_path / "plain.yaml").write_text("{}\n")
    none = tuner("system", "check", "--config", "plain.yaml", cwd=tmp_path)
    assert one_line_error(none) == ("error: tuner system check asks your own system: this config has no system: "
                                    "(tuner's built-in pipeline is checked by tuner eval)")


def test_a_haystack_pipeline_as_its_docs_write_it_answers_with_its_retriever_s_documents(own):
    """Haystack: the question reaches the retriever's query and the prompt builder's question by their names, k the
    retriever's top_k, the prompt a builder of the pipeline; the answer builder's answer and documents read, their
    sources as ids (tuned end to end in tests/test_frameworks.py)."""
    sys.path.insert(0, str(TESTS))
    import haystack_pipeline

    reply = haystack_pipeline.built({"id": "q01", "text": "What is the capital of Velmora?"}, {"k": 3,
                                                                                               "prompt": "careful"})
    assert reply["answer"] == "The capital is Port Ardent."
    assert len(reply["contexts"]) == 3 and "port-ardent" in [c["id"] for c in reply["contexts"]]
    assert reply["contexts_from"] == "the documents of the answer builder's answer (Haystack's pipeline outputs)"
    with pytest.raises(ValueError, match="knob prompt reaches no component: map it with knobs="):
        haystack_pipeline.fixed({"id": "q01", "text": "?"}, {"k": 2, "prompt": "short"})


def test_a_dspy_program_as_its_tutorial_writes_it_answers_with_the_passages_it_handed_its_module(own):
    """DSPy: the question goes in as forward's argument, the contexts are the passages the program handed its
    ChainOfThought (seen through DSPy's callbacks: the prediction holds only the answer), ids by the program's own
    corpus (tuned end to end in tests/test_frameworks.py)."""
    sys.path.insert(0, str(TESTS))
    import dspy_program

    reply = dspy_program.answer({"id": "q01", "text": "What is the capital of Velmora?"}, {"k": 2, "prompt": "plain"})
    assert reply["answer"] == "The capital is Port Ardent."
    assert sorted(c["id"] for c in reply["contexts"]) == ["port-ardent", "velmora"]
    assert reply["contexts_from"] == "the 'context' handed to ChainOfThought (DSPy's callbacks)"


def test_a_system_nobody_serves_is_one_line_before_the_first_trial(tmp_path):
    with SystemServer(own_answer) as gone:  # a port where nothing listens any more
        url = gone.url
    write_config(tmp_path, {"http": url})
    result = tuner(*OPTIMIZE, "--target", "ndcg@10", "--trials", "1", cwd=tmp_path)
    one_line_error(result, f"cannot reach the system at {url} (", "is it running?", started=True)


def test_an_estimate_measures_the_system_on_questions_spread_over_the_set(tmp_path, fake_embedder, own,
                                                                          monkeypatch):
    """A system's cost is unknown until asked: the estimate asks it four search questions spread over the set (every
    other one of eight) with the defaults (cached for the study) and scales its measured seconds, beside the judge's
    calls."""
    from tuner.models.provider import Models
    from tuner.study.estimate import estimate_study
    from tuner.study.optimize import StudySettings

    monkeypatch.setenv("OWN_SYSTEM_DELAY", "0.3")
    llm = StrictIsUnfaithful()
    told = estimate_study(python_project(tmp_path), StudySettings(["faithfulness"]), 10, 0.0, limit=8,
                          models=Models(llm, llm), embedder=fake_embedder)
    assert told.sampled == 4 and len(calls(own)) == 4
    assert told.seconds_per_question >= 0.3 and told.calls_per_question >= 2  # the reply and the judge's verdicts
    assert told.questions == 80


def test_the_judge_check_and_a_refused_knob_as_printed_on_a_system_study(tmp_path, fake_embedder, own):
    """The judge check needs no index of tuner's: with an own system it checks the judge on the gold documents
    whole; and a trial whose knobs the system refuses is said with the system's own words."""
    from tuner.evaluation.judge.cases import KINDS, make_cases
    from tuner.evaluation.judge.check import check_judge

    session = open_session(tmp_path, fake_embedder, SPACE, limit=6, project=python_project(tmp_path))
    runner = session.runner()
    assert runner.workspace.index is None
    kinds = [k for k in KINDS if k != "paraphrase" and not k.startswith("labelled_")]
    cases = make_cases(runner, session.dataset, session.dataset.questions, ["faithfulness"], 4, kinds)
    checked = check_judge(runner, cases)
    assert cases and checked.metrics["faithfulness"].auc is not None

    with SystemServer(own_answer, "400") as server, FakeEndpoint("scripted", delay=0) as judge:
        model = {"backend": "openai-compatible", "base_url": judge.url, "model": "m"}
        (tmp_path / "cli").mkdir()
        write_config(tmp_path / "cli", {"http": server.url}, judge=model, generator=model)
        result = tuner(*OPTIMIZE, "--target", "faithfulness", "--trials", "1", cwd=tmp_path / "cli")
    assert f"system {server.url} refused the knobs k=2, prompt=plain: k=2 is more than this index holds (HTTP 400)" \
        in one_line_error(result, started=True)
