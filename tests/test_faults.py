"""Faults a user meets: damaged storage, bad input, signals. Each case asserts the exit code, one line on stderr,
no traceback, and that the study's completed trials are intact afterwards."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import optuna
import pytest
import yaml

from tests.fakes import FakeEndpoint, HashingEmbedder, ScriptedLLM
from tests.test_cli import tuner
from tests.test_study import PROGRAMS, open_session
from tuner.cache import SqliteStore
from tuner.evaluation.rag_eval import Models
from tuner.errors import ConfigError
from tuner.study.optimize import recover_interrupted
from tuner.study.results import load_study, trial_states
from tuner.study.storage import journal_lock, release_stale_lock, repair_journal, study_folder

#: what a kill -9 or a power cut in the middle of Optuna's append leaves: an entry without its end
TORN = b'{"op_code":6,"worker_id":"a-b","trial_id":1,"user_attr":{"cost":{"calls'


def one_line_error(result, *words: str, started: bool = False) -> str:
    """The failed command's stderr: exactly one line, no traceback, naming each of `words`. A study that
    `started` has printed its status lines (study, notes, report) first: then exactly one of them is the error."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if started:
        lines = [line for line in lines if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


#: room for more trials than the two run first (a configuration is never run twice)
SPACE = {"params": {**PROGRAMS["params"], "top_k": {"type": "int", "low": 3, "high": 6}}}


@pytest.fixture
def study_of_two(tmp_path, fake_embedder):
    """A finished two-trial study on the demo (scripted LLM), as a kill leaves it on disk."""
    session = open_session(tmp_path, fake_embedder, SPACE, limit=2)
    session.run(2)
    return session.folder


def interruptible(command: list[str], cwd) -> subprocess.Popen:
    """`command` started as from a terminal, where Ctrl-C is live: a shell's background job (nohup pytest &, some
    CI runners) hands its children SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def complete(folder) -> int:
    return trial_states(load_study(folder).get_trials(deepcopy=False)).count("complete")


def test_a_torn_journal_tail_is_set_aside_and_the_study_resumes(study_of_two, tmp_path, fake_embedder):
    journal = study_of_two.journal
    with open(journal, "ab") as f:
        f.write(TORN)
    session = open_session(tmp_path, fake_embedder, SPACE, limit=2)  # the resume: repairs, then appends
    assert session.run(3) == 1
    assert complete(study_of_two) == 3
    assert journal.read_bytes().endswith(b"\n")
    assert (journal.parent / "journal.log.torn").read_bytes() == TORN + b"\n"
    listed = tuner("studies", "--studies-dir", str(tmp_path / "studies"), cwd=tmp_path)
    assert listed.returncode == 0 and "unreadable" not in listed.stdout, listed.stdout + listed.stderr


def test_a_journal_lock_left_by_a_kill_is_released_and_the_study_resumes(study_of_two, tmp_path, fake_embedder,
                                                                       monkeypatch, caplog):
    """A kill -9 mid-append leaves Optuna's lock: a symlink to the journal, named by the path as given. Relative,
    it dangled, Optuna never judged it stale, and the resume waited for it forever (seen in CI)."""
    monkeypatch.chdir(tmp_path)
    journal = study_of_two.journal.relative_to(tmp_path)
    (tmp_path / f"{journal}.lock").symlink_to(journal)  # what the killed process's JournalFileSymlinkLock left
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="tuner"):
        session = open_session(tmp_path, fake_embedder, SPACE, limit=2)
    assert time.monotonic() - started < 15
    assert "removed the journal lock a process killed mid-write left behind" in caplog.text
    assert session.run(3) == 1 and complete(study_of_two) == 3


def test_a_journal_lock_a_live_writer_holds_is_left_to_it(study_of_two):
    import threading

    lock, released = journal_lock(study_of_two.journal), []
    lock.acquire()
    writer = threading.Timer(1.0, lambda: released.append(lock.release()))  # a slow append, but a live one
    writer.start()
    assert release_stale_lock(study_of_two.journal, patience=3.0) is None
    writer.join()
    assert released == [None]  # its release found its own lock (Optuna raises if someone else removed it)


def test_a_journal_an_old_resume_appended_to_after_a_torn_entry_is_repaired(study_of_two):
    journal = study_of_two.journal
    *whole, last = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(whole) + TORN + last)  # the next entry was glued to the torn one
    with pytest.raises(ValueError):  # the glued line every command choked on before
        json.loads(TORN + last)
    note = repair_journal(journal)
    assert note and "journal.log.torn" in note
    assert journal.read_bytes() == b"".join(whole) + last  # the glued entry is kept whole
    assert complete(study_of_two) == 2
    assert repair_journal(journal) is None  # sound now: nothing more to do


def test_an_entry_damaged_mid_journal_is_named_as_damage_and_the_finished_trial_is_not_paid_again(
        study_of_two, tmp_path, fake_embedder):
    """The entry that completed the baseline, cut in half in the middle of the journal (disk damage, not a kill):
    it was called a kill's half-written entry, and the baseline then showed as running and was run again although
    its trial file held the result."""
    journal = study_of_two.journal
    lines = journal.read_bytes().splitlines(keepends=True)
    done = next(i for i, line in enumerate(lines) if b'"op_code":6' in line and b'"trial_id":0' in line
                and b'"state":1' in line)
    lines[done] = lines[done][:len(lines[done]) // 2] + b"\n"
    journal.write_bytes(b"".join(lines))
    note = repair_journal(journal)
    assert "1 damaged entry from the middle of the journal" in note and "a kill cannot leave that" in note
    assert "half-written" not in note
    assert trial_states(load_study(study_of_two).trials)[0] == "running"  # what the damage left
    llm = ScriptedLLM()
    session = open_session(tmp_path, fake_embedder, SPACE, limit=2, llm=llm)
    trials = session.study.get_trials(deepcopy=False)
    assert trial_states(trials)[:2] == ["complete", "complete"] and session.recovered == []
    assert trials[0].user_attrs["recovered_from_file"] and trials[0].user_attrs["baseline"]
    assert trials[0].values == [study_of_two.read_trial(0).result.value("faithfulness")]
    assert len(trials) == 2  # nothing queued again: the baseline is not paid for twice
    assert session.run(3) == 1 and complete(study_of_two) == 3


def test_a_report_that_cannot_be_written_is_a_note_and_the_study_is_kept(study_of_two, tmp_path):
    from tuner.errors import TunerError
    from tuner.reports import study_report

    reports = tmp_path / "reports-is-a-file"
    reports.write_text("")
    with pytest.raises(TunerError, match="cannot write the report"):
        study_report(study_of_two, reports)
    where = ["--study", "s", "--studies-dir", str(study_of_two.root.parent), "--reports-dir", str(reports)]
    # `tuner report` exists to write it: one line, exit 1; a command that writes it on the side says so in a note
    one_line_error(tuner("report", *where, cwd=tmp_path), "cannot write the report", str(reports))
    analyzed = tuner("analyze", *where, cwd=tmp_path)
    assert analyzed.returncode == 0 and analyzed.stderr.startswith("note: no report written:"), analyzed.stderr
    assert complete(study_of_two) == 2


def test_tuner_studies_lists_an_unreadable_study_and_the_others(study_of_two, tmp_path):
    broken = study_of_two.root.parent / "broken"
    broken.mkdir()
    (broken / "study.json").write_text('{"targets": ["faithful')  # cut short
    result = tuner("studies", "--studies-dir", str(study_of_two.root.parent), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") > 3}
    assert "unreadable" in rows["broken"]
    assert "unreadable" not in rows["s"] and "faithfulness" in rows["s"] and "2" in rows["s"]


def test_tuner_studies_in_a_missing_folder_says_so(tmp_path):
    result = tuner("studies", "--studies-dir", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""  # not an empty table, as if the folder held no study
    assert result.stderr.strip() == f"no studies: {tmp_path / 'nowhere'} does not exist (no study has run here yet, " \
                                    f"or pass --studies-dir or --storage)"


def filled_cache(path, n=300):
    cache = SqliteStore(path)
    for i in range(n):
        cache.put(f"k{i}", {"text": f"answer {i} " + "x" * 1000})
    cache._db.close()  # checkpoints the write-ahead log into the file, as a finished run leaves it
    return path


@pytest.mark.parametrize("damage", ["page", "whole"])
def test_a_damaged_llm_cache_is_moved_aside_and_rebuilt_from_what_is_readable(tmp_path, caplog, damage):
    path = filled_cache(tmp_path / "llm_calls.sqlite")
    data = bytearray(path.read_bytes())
    if damage == "page":  # a few pages in the middle overwritten: most entries survive
        data[40 * 4096: 43 * 4096] = bytes(range(256)) * 48
    else:  # not a database at all (a truncated copy, another file)
        data[:] = b"not a database" * 100
    path.write_bytes(bytes(data))
    with caplog.at_level("INFO", logger="tuner"):
        cache = SqliteStore(path)
    [note] = [r.getMessage() for r in caplog.records]  # one line, reported to the command line (not printed)
    assert "damaged" in note and "llm_calls.sqlite.corrupt" in note and len(note.strip().splitlines()) == 1
    assert (tmp_path / "llm_calls.sqlite.corrupt").is_file()
    kept = len(cache)
    if damage == "page":
        assert 200 < kept < 300 and cache.get("k0") == {"text": "answer 0 " + "x" * 1000}
    else:
        assert kept == 0
    cache.put("new", 1)  # the run goes on with the rebuilt cache
    assert cache.get("new") == 1 and len(cache) == kept + 1
    assert f"{kept} entries still readable" in note


def test_a_sound_cache_is_left_alone(tmp_path, caplog):
    path = filled_cache(tmp_path / "llm_calls.sqlite", n=5)
    with caplog.at_level("INFO", logger="tuner"):
        assert len(SqliteStore(path)) == 5
    assert caplog.records == []
    assert not (tmp_path / "llm_calls.sqlite.corrupt").exists()


def test_a_study_folder_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "studies").write_text("a file where the studies folder should be")
    result = tuner("optimize", "--target", "recall@5", "--trials", "1", "--limit", "2", "--studies-dir",
                   str(tmp_path / "studies"), cwd=tmp_path)
    one_line_error(result, "studies")


def test_a_deleted_study_json_is_rebuilt_from_the_journal(study_of_two, tmp_path, fake_embedder, capsys):
    before = study_of_two.read_meta()
    study_of_two.meta.unlink()
    shown = tuner("trials", "--study", "s", "--studies-dir", str(study_of_two.root.parent), cwd=tmp_path)
    assert shown.returncode == 0 and "rebuilt" in shown.stderr, shown.stderr
    assert study_of_two.read_meta() == before and complete(study_of_two) == 2
    study_of_two.meta.unlink()
    with pytest.raises(ConfigError, match="optimises faithfulness"):  # a changed target is still refused
        open_session(tmp_path, fake_embedder, SPACE, limit=2, targets=("answer_relevancy",))
    assert complete(study_of_two) == 2


def test_a_study_json_from_an_older_tuner_resumes_and_one_from_a_newer_fails_in_one_line(
        study_of_two, tmp_path, fake_embedder):
    written = json.loads(study_of_two.meta.read_text())
    assert written["schema"] == 1
    old = {k: v for k, v in written.items() if k not in ("schema", "cache", "split", "data", "space", "programs")}
    study_of_two.meta.write_text(json.dumps(old))  # what tuner 0.3 wrote
    meta = study_of_two.read_meta()
    assert (meta.cache, meta.split, meta.data, meta.space, meta.programs) == ("own", None, None, None, ())
    assert meta.targets == ("faithfulness",) and not meta.held_out.active
    session = open_session(tmp_path, fake_embedder, SPACE, limit=2)  # resumes: the old settings are its own
    assert session.run(3) == 1 and complete(study_of_two) == 3
    study_of_two.meta.write_text(json.dumps({**written, "schema": 2}))
    where = ["--study", "s", "--studies-dir", str(study_of_two.root.parent)]
    one_line_error(tuner("trials", *where, cwd=tmp_path), "study.json", "newer tuner", "schema 2")


def test_a_resume_takes_the_study_s_own_settings_and_refuses_other_ones(tmp_path, cli_with):
    invoke = cli_with(ScriptedLLM())
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"params": {"top_k": {"type": "int", "low": 2, "high": 3}}}))
    first = ["optimize", "--limit", "2", "--study", "night", "--judge-check", "off", "--target", "answer_relevancy",
             "--search-space", "space.yaml", "--constraint", "faithfulness>=0.1"]
    assert invoke(*first, "--trials", "1").exit_code == 0
    again = invoke("optimize", "--limit", "2", "--study", "night", "--trials", "2")
    assert again.exit_code == 0, again.output  # the study's own target, space and constraint
    study = load_study(study_folder(tmp_path / "studies", "night"))
    assert len(study.trials) == 2 and {t.params["top_k"] for t in study.trials[1:]} <= {2, 3}
    assert set(study.trials[1].constraints) == {  # the recorded constraint applied, and the coverage guard
        "faithfulness>=0.1", "answer_relevancy scored on >= 80%"}
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE]
    assert "answer_relevancy" in study.trials[1].user_attrs["metrics"]
    refused = invoke("optimize", "--limit", "2", "--study", "night", "--trials", "3", "--search-space", "quick")
    assert isinstance(refused.exception, ConfigError) and "searched another space" in str(refused.exception)
    assert len(load_study(study_folder(tmp_path / "studies", "night")).trials) == 2


@pytest.mark.parametrize("params, said", [
    ({"top_k": {"type": "int", "low": 2, "high": 10, "step": 0.5}}, "params.top_k: an int parameter takes whole"),
    ({"reranker": {"type": "categorical", "choices": ["none", "colbert"]}}, "'colbert' is not a value reranker takes"),
    ({"alpha": {"type": "float", "low": 0, "high": 2}}, "2.0 is not a value alpha takes"),
    ({"top_k": {"type": "int", "low": 2, "high": 500}}, "500 is not a value top_k takes"),
    ({"alpha": {"type": "float", "low": 0, "high": 1, "step": 0.6}}, "step 0.6 does not land on high"),
    ({"reranker": {"type": "categorical", "choices": ["none", "embedding"]},
      "confidence_threshold": {"type": "float", "low": 0.3, "high": 0.8, "when": {"reranker": ["colbert"]}}},
     "reranker never takes colbert"),
    ({"top_k": {"type": "int", "low": True, "high": 5}}, "low: expected a number, got true"),
])
def test_a_search_space_is_checked_whole_before_any_trial(tmp_path, params, said):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"params": params}, sort_keys=False))
    one_line_error(tuner("spaces", "show", "bad.yaml", cwd=tmp_path), "bad.yaml", said)
    started = tuner("optimize", "--search-space", "bad.yaml", "--trials", "2", "--limit", "2", cwd=tmp_path)
    one_line_error(started, said)
    assert not (tmp_path / "studies" / "default").exists()  # refused before anything was created


def test_a_baseline_outside_the_space_is_named_once(tmp_path, fake_embedder):
    session = open_session(tmp_path, fake_embedder, {"params": {"top_k": {"type": "int", "low": 2, "high": 3}}},
                           limit=2)
    assert [n for n in session.notes() if "baseline's top_k=5 lies outside the search space" in n]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session.run(2)
    assert not [w for w in caught if "out of range" in str(w.message)]  # said once by tuner, not by Optuna
    assert not [n for n in session.notes() if "outside" in n]  # once trials ran, not on every resume
    assert session.study.trials[0].params == {"top_k": 5}


def beir(folder, corpus: bytes, qrels: str = "q1\td1\t1\n"):
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes(corpus)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "Who built the bridge?"}\n')
    (folder / "qrels.tsv").write_text(qrels)
    return folder


DOCS = b'{"_id": "d1", "text": "Ilsa Marrow built the bridge."}\n{"_id": "d2", "text": "The river is wide."}\n'


LATIN1 = DOCS + b'{"_id": "d3", "text": "caf\xe9"}\n'  # text saved in Latin-1, not UTF-8
E_ACUTE = LATIN1.index(b"\xe9")


@pytest.mark.parametrize("corpus, said", [
    (LATIN1, f"corpus.jsonl: not UTF-8 text (line 3, byte {E_ACUTE}: b'\\xe9')"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "corpus.jsonl: not UTF-8 text (line 1, byte 0"),  # an image
    (DOCS + b'{"_id": "d1", "text": "again"}\n', "set: document id 'd1' appears 2 times"),
])
def test_unreadable_or_ambiguous_data_is_one_line(tmp_path, corpus, said):
    folder = beir(tmp_path / "set", corpus)
    one_line_error(tuner("data", str(folder), cwd=tmp_path), said)


def test_blank_documents_and_unknown_gold_ids_are_noted(tmp_path):
    folder = beir(tmp_path / "set", DOCS + b'{"_id": "d3", "title": "no text"}\n', qrels="q1\td1\t1\nq1\td9\t1\n")
    result = tuner("data", str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "note: 1 document(s) have no text and are left out (e.g. 'd3')" in result.stderr
    assert "note: 1 gold document id(s) name no document of the corpus (e.g. 'd9')" in result.stderr
    assert "│ documents              │     2 │" in result.stdout


@pytest.mark.parametrize("args, said", [
    (("optimize", "--constraint", "faithfulness>=0.7.1"), "--constraint 'faithfulness>=0.7.1'"),
    (("eval", "--metrics", ""), "--metrics is empty"),
    (("eval", "--metrics", " , "), "--metrics is empty"),
    (("eval", "--set", "top_k=true"), "top_k"),
])
def test_bad_options_are_one_line(tmp_path, args, said):
    one_line_error(tuner(*args, cwd=tmp_path), said)
    assert not (tmp_path / "studies" / "default").exists()


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
        deadline = time.time() + 300
        while not server.requests:  # the first trial is waiting for its first answer
            assert process.poll() is None and time.time() < deadline, process.communicate()
            time.sleep(0.2)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        took = time.monotonic() - sent
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


@pytest.mark.parametrize("fault, said", [
    ("down", "cannot reach the LLM endpoint"),
    ("500", "answered HTTP 500"),
    ("html", "not a chat completion"),
    ("broken json", "not a chat completion"),
    ("unset key", "TUNER_TEST_UNSET_KEY"),
    ("truncated gguf", "cannot load as a GGUF model"),
])
def test_a_model_fault_on_resume_is_one_line_and_keeps_the_finished_trials(study_of_two, tmp_path, fault, said):
    """The night's second run meets a broken model: one line, non-zero exit, and the two finished trials stand."""
    with contextlib.ExitStack() as running:
        if fault == "truncated gguf":
            (tmp_path / "model.gguf").write_bytes(b"GGUF" + bytes(1000))
            model = {"model": "cut", "path": str(tmp_path / "model.gguf")}
        elif fault == "down":
            with FakeEndpoint() as gone:  # a port where nothing listens any more
                model = {"backend": "openai-compatible", "base_url": gone.url, "model": "m"}
        else:
            server = running.enter_context(FakeEndpoint(fault if fault in ("500", "html", "broken json") else "ok"))
            model = {"backend": "openai-compatible", "base_url": server.url, "model": "m"}
            if fault == "unset key":
                model["api_key_env"] = "TUNER_TEST_UNSET_KEY"
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
        result = tuner("optimize", "--config", "tuner.yaml", "--study", "s", "--trials", "3", "--limit", "2",
                       "--judge-check", "off", cwd=tmp_path)
    one_line_error(result, said, started=True)
    assert result.returncode == 1
    states = trial_states(load_study(study_of_two).trials)
    assert states[:2] == ["complete", "complete"]  # the finished trials stand
    assert states[2:] in ([], ["interrupted"])  # the trial the model failed runs again on the next resume


class UnparsableJudge(ScriptedLLM):
    """Answers questions, but every judgement is prose where RAGAS wants JSON."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if json_schema is not None:
            from tuner.models.llms import Completion
            return Completion("I think the answer is mostly fine.", 10, 8)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


def test_a_study_whose_every_trial_failed_exits_non_zero_and_says_why(tmp_path, cli_with):
    from tuner.errors import TunerError

    result = cli_with(UnparsableJudge())("optimize", "--limit", "2", "--trials", "2", "--study", "bad",
                                         "--judge-check", "off", "--search-space", "quick")
    assert isinstance(result.exception, TunerError), result.output
    assert str(result.exception) == ("no trial of study bad finished (2 failed; the last: no question could be "
                                     "scored on faithfulness): nothing to report as best")
    assert "Traceback" not in result.output and (tmp_path / "reports" / "bad" / "report.md").is_file()


class RefusesHardQuestions(ScriptedLLM):
    """Declines every question about the lighthouse, answers the rest."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        asked = re.search(r"\[\[ ## question ## \]\]\s*(.*)", messages[-1]["content"])
        if json_schema is None and asked and "lighthouse" in asked.group(1).lower():
            self.calls.append({"messages": messages, "json_schema": None, "seed": seed})
            from tuner.models.llms import Completion
            return Completion("[[ ## answer ## ]]\nI cannot answer from the given contexts.\n\n"
                              "[[ ## completed ## ]]", 50, 9)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


@pytest.mark.parametrize("rule, counted", [("zero_if_answerable", True), ("zero", True), ("exclude", False)])
def test_refusing_hard_questions_does_not_win_faithfulness(tmp_path, fake_embedder, rule, counted):
    from tuner.config import EvaluationConfig, ProjectConfig
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    project = ProjectConfig(cache_dir=tmp_path, evaluation=EvaluationConfig(metrics=["faithfulness"], refusal=rule))
    llm = RefusesHardQuestions()
    runner = RagRunner(open_workspace(project, embedder=fake_embedder), models=Models(llm, llm))
    result = runner.evaluate(project.pipeline)
    refused = [q for q in result.questions if q.refusal]
    assert refused and len(refused) < len(result.questions)
    assert all(q.failures["faithfulness"].reason == "refusal" for q in refused)  # always recorded as such
    if counted:  # the demo names gold ids and top_k 5 finds them: each refusal counts, as 0
        assert all(q.scores["faithfulness"] == 0.0 for q in refused)
        assert result.scored("faithfulness") == len(result.questions)
    else:
        assert result.scored("faithfulness") == len(result.questions) - len(refused)
    assert result.metrics["faithfulness"] < 1.0 if counted else result.metrics["faithfulness"] == 1.0


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


def test_a_resume_with_another_limit_is_refused(tmp_path):
    """Made with --limit 20 --holdout 0.3, resumed with --limit 22: later trials would score on other questions and
    `eval --split holdout` would hold out one the search saw."""
    first = ["optimize", "--target", "recall@5", "--search-space", "retrieval", "--trials", "1", "--study", "s",
             "--holdout", "0.3", "--judge-check", "off"]
    made = tuner(*first, "--limit", "20", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    refused = tuner("optimize", "--study", "s", "--trials", "2", "--limit", "22", cwd=tmp_path)
    one_line_error(refused, "measured on 20 questions", "this run has 22 questions", "--limit")
    assert complete(study_folder(tmp_path / "studies", "s")) == 1


def test_a_utf8_byte_order_mark_is_read(tmp_path):
    folder = beir(tmp_path / "set", b"\xef\xbb\xbf" + DOCS)
    (folder / "queries.jsonl").write_bytes(b'\xef\xbb\xbf{"_id": "q1", "text": "Who built the bridge?"}\n')
    (folder / "qrels.tsv").write_bytes(b"\xef\xbb\xbfq1\td1\t1\n")
    from tuner.data import load_dataset

    data = load_dataset(folder)
    assert [d.id for d in data.documents] == ["d1", "d2"] and data.questions[0].relevant_ids == {"d1"}
    rows = tmp_path / "rows.json"
    rows.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"question": "Who built it?", "answer": "Ilsa",
                                                    "contexts": ["Ilsa Marrow built the bridge."]}]).encode())
    from tuner.data._io import read_json

    assert read_json(rows)[0]["answer"] == "Ilsa"


def test_a_grid_too_large_to_run_is_refused_before_anything_starts(tmp_path):
    """The bundled retrieval space's grid has over 10^8 points: Optuna built it whole and the kernel killed tuner
    at 23.5 GB. Counted and refused in one line, on a new study and on a resume that switches to grid."""
    grid = ["optimize", "--target", "recall@5", "--search-space", "retrieval", "--trials", "2", "--limit", "3",
            "--judge-check", "off", "--study", "g"]
    refused = tuner(*grid, "--sampler", "grid", cwd=tmp_path)
    one_line_error(refused, "--sampler grid", "points", "more than a study could ever run", "tpe")
    assert not (tmp_path / "studies" / "g").exists()
    assert tuner(*grid, cwd=tmp_path).returncode == 0  # made with tpe, resumed with grid
    one_line_error(tuner(*grid[:5], "--trials", "3", "--study", "g", "--sampler", "grid", cwd=tmp_path),
                   "--sampler grid")
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({"params": {"top_k": {"type": "int", "low": 2, "high": 4}}}))
    ran = tuner("optimize", "--target", "recall@5", "--search-space", str(small), "--trials", "3", "--limit", "3",
                "--sampler", "grid", "--study", "small", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_bad_index_knob_values_are_one_line_before_any_index_is_built(tmp_path):
    one_line_error(tuner("eval", "--retrieval-only", "--set", "chunker=paragraphs", cwd=tmp_path), "chunker",
                   "paragraphs")
    one_line_error(tuner("eval", "--retrieval-only", "--set", "chunk_size=12", cwd=tmp_path),
                   "chunk_overlap 30 is not below chunk_size 12")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"params": {
        "chunker": {"type": "categorical", "choices": ["words", "paragraphs"]}}}))
    one_line_error(tuner("spaces", "show", "bad.yaml", cwd=tmp_path), "params.chunker", "'paragraphs'")
    (tmp_path / "small.yaml").write_text(yaml.safe_dump({"params": {
        "chunk_size": {"type": "categorical", "choices": [20, 150]}}}))
    refused = tuner("optimize", "--target", "recall@5", "--search-space", "small.yaml", "--trials", "2",
                    "--limit", "2", cwd=tmp_path)
    one_line_error(refused, "small.yaml", "chunk_size=20", "chunk_overlap 30 is not below chunk_size 20")
    assert not (tmp_path / "studies" / "default").exists()
    (tmp_path / "tuner.yaml").write_text("chunking: {size: 200}\n")  # a baseline no choice of the space holds
    refused = tuner("optimize", "--target", "recall@5", "--search-space", "retrieval", "--trials", "2", "--limit", "2",
                    "--config", "tuner.yaml", cwd=tmp_path)
    one_line_error(refused, "the baseline's chunk_size=200 is not among the space's choices")
    assert not (tmp_path / "studies" / "default").exists()


def test_a_space_whose_draws_clash_is_refused_before_any_trial(tmp_path):
    (tmp_path / "clash.yaml").write_text(yaml.safe_dump({"params": {
        "min_docs": {"type": "int", "low": 1, "high": 5},
        "max_docs": {"type": "int", "low": 3, "high": 8}}}, sort_keys=False))
    refused = tuner("optimize", "--target", "recall@5", "--search-space", "clash.yaml", "--trials", "2",
                    "--limit", "2", cwd=tmp_path)
    one_line_error(refused, "clash.yaml", "min_docs=5, max_docs=3", "which no pipeline takes")
    assert not (tmp_path / "studies" / "default").exists()


def saved_program(path, fields=("Question:", "Contexts:", "Answer:"), predictor="respond"):
    """A DSPy program JSON as `program.save` writes it, with the given predictor name and field prefixes."""
    state = {"traces": [], "train": [], "demos": [], "lm": None, "signature": {
        "instructions": "Label the text.", "fields": [{"prefix": f, "description": "x"} for f in fields]}}
    path.write_text(json.dumps({predictor: state, "metadata": {"dependency_versions": {"dspy": "3.4.1"}}}))
    return path


@pytest.mark.parametrize("make, said", [
    (lambda p: saved_program(p, fields=("Text:", "Label:")), "predictor respond reads and writes Text: Label:"),
    (lambda p: saved_program(p, predictor="classify"), "predictors classify; an answer program has respond"),
    (lambda p: p.write_text('{"respond": {"signature": {"fie'), "not a saved answer program (JSONDecodeError"),
    (lambda p: None, "file not found"),
])
def test_a_program_of_another_signature_or_a_broken_file_is_refused_when_the_space_loads(tmp_path, make, said):
    from tuner.prompts.programs import load_program

    program = tmp_path / "other.json"
    make(program)
    with pytest.raises(ConfigError, match=re.escape(said)):  # used to answer with another signature, silently
        load_program(str(program))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"params": {"program": {
        "type": "categorical", "choices": ["default", str(program)]}}}))
    one_line_error(tuner("spaces", "show", "space.yaml", cwd=tmp_path), "params.program", said)
    refused = tuner("optimize", "--search-space", "space.yaml", "--trials", "2", "--limit", "2", cwd=tmp_path)
    one_line_error(refused, said)
    assert not (tmp_path / "studies" / "default").exists()  # before the baseline ran, not when a trial drew it


def test_an_unknown_program_name_is_refused_with_the_choices(tmp_path):
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"params": {"program": {
        "type": "categorical", "choices": ["default", "terse"]}}}))
    one_line_error(tuner("spaces", "show", "space.yaml", cwd=tmp_path), "'terse' is not a value program takes",
                   "default, strict or a saved program .json")


class KilledAfter(HashingEmbedder):
    """Embeds `slices` calls' worth of texts, then dies as a kill would stop it."""

    def __init__(self, slices: int):
        super().__init__()
        self.slices = slices

    def encode(self, texts, on_progress=None):
        if self.calls == self.slices:
            raise KeyboardInterrupt
        return super().encode(texts, on_progress)


def test_a_kill_during_embedding_keeps_every_slice_already_embedded(tmp_path):
    """All missing texts used to be embedded in one call and written at the end: a kill 10 minutes in lost all."""
    from tuner.models.embedders import CachedEmbedder
    from tuner.models.embedders._cache import WRITE_EVERY

    texts = [f"chunk {i} of a long corpus" for i in range(WRITE_EVERY * 3 + 7)]
    with pytest.raises(KeyboardInterrupt):
        CachedEmbedder(KilledAfter(slices=2), tmp_path).encode(texts)
    resumed = HashingEmbedder()
    vectors = CachedEmbedder(resumed, tmp_path).encode(texts)
    assert resumed.texts_encoded == len(texts) - 2 * WRITE_EVERY  # only what the kill interrupted is paid again
    np.testing.assert_allclose(vectors, HashingEmbedder().encode(texts), atol=1e-6)
    # a second worker on the same store uses what the first wrote as it went
    other = HashingEmbedder()
    CachedEmbedder(other, tmp_path).encode(texts[::-1])
    assert other.texts_encoded == 0


def essays(folder, count=4, words=2400):
    """A BEIR corpus of long essays (one gold essay per question), as the judge check met it."""
    folder.mkdir()
    topics = ["bridges", "lighthouses", "orchards", "harbours"]
    with open(folder / "corpus.jsonl", "w") as corpus:
        for i in range(count):
            filler = " ".join(f"The {topics[i]} of region {j} were described in volume {j}." for j in range(words // 9))
            first = f"The first {topics[i][:-1]} was built by Maren Holt{i} in 18{i}0."
            text = f"Essay {i} on {topics[i]}. {first} {filler}"
            corpus.write(json.dumps({"_id": f"e{i}", "title": f"On {topics[i]}", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w") as queries:
        for i in range(count):
            queries.write(json.dumps({"_id": f"q{i}", "text": f"Who built the first {topics[i][:-1]}?",
                                      "answer": f"Maren Holt{i} built it in 18{i}0."}) + "\n")
    (folder / "qrels.tsv").write_text("".join(f"q{i}\te{i}\t1\n" for i in range(count)))
    return folder


class SmallWindowJudge(ScriptedLLM):
    """A scripted judge with a context window: a prompt beyond it fails as llama.cpp's does."""

    context_window = 8192

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        from tuner.models.llms import PromptTooLong

        if self.count_tokens(" ".join(m["content"] for m in messages)) + max_tokens > self.context_window:
            raise PromptTooLong(f"Requested tokens exceed context window of {self.context_window}")
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


def test_the_judge_check_on_long_documents_judges_their_chunks_and_names_what_cannot_fit(tmp_path, fake_embedder):
    """Essays of 2,400 words: the cases used whole gold documents as contexts, and after 11 minutes a prompt
    exceeded the judge's window and nothing was kept. Cases now hold the gold documents' best chunks (what a
    study's contexts are), every case is measured against the window first, and one that still overflows is
    that case's failure."""
    from tuner.config import ChunkingConfig, EvaluationConfig, ProjectConfig
    from tuner.evaluation.judge_check import check_judge, make_cases, tokens_needed
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    project = ProjectConfig(dataset={"path": essays(tmp_path / "essays")}, cache_dir=tmp_path / "cache",
                            chunking=ChunkingConfig(size=150, overlap=30),
                            evaluation=EvaluationConfig(metrics=["faithfulness", "context_recall"]))
    judge = SmallWindowJudge()
    runner = RagRunner(open_workspace(project, embedder=fake_embedder), models=Models(judge, judge))
    data = runner.workspace.dataset
    cases = make_cases(runner, data, data.questions, ["faithfulness", "context_recall"], 4,
                       kinds=("reference", "other_answer", "own_contexts", "other_contexts"))
    assert cases and all(len(c) < 1500 for case in cases for c in case.contexts)  # chunks, not 2,400-word essays
    own = next(c for c in cases if c.kind == "own_contexts" and c.question_id == "q1")
    assert "Maren Holt1" in own.contexts[0]  # the gold essay's chunk that answers the question
    check = check_judge(runner, cases)
    assert len(check.cases) == len(cases) and not check.too_long
    assert all(s.failure != "too_long" for s in check.cases)
    # a window too small for a case: named before any call, the rest judged and kept
    needs = sorted(tokens_needed(judge, project.judge_tokens, c) for c in cases)
    judge.context_window = window = needs[len(needs) // 2]
    over = [c.key for c in cases if tokens_needed(judge, project.judge_tokens, c) > window]
    calls_before = len(judge.calls)
    check = check_judge(runner, cases)
    assert over and check.too_long == tuple(over) and len(check.cases) == len(cases) - len(over)
    assert any("left out" in p and f"{window}-token" in p for p in check.problems)
    assert len(judge.calls) == calls_before  # the rest came from the cache: nothing failed, nothing re-paid


def test_a_prompt_beyond_the_window_is_that_sample_s_failure(tmp_path, fake_embedder):
    """A judge prompt that overflows (the up-front estimate missed it, or a study's contexts are long) scores that
    question "too_long" instead of interrupting the trial (which a resume would run, and fail, again)."""
    from tuner.config import EvaluationConfig
    from tuner.evaluation.ragas_judge import RagasScorer

    judge = SmallWindowJudge()
    scorer = RagasScorer(judge, fake_embedder, EvaluationConfig(), 1024)
    long_context = "The bridge was painted grey in spring. " * 2000
    outcome = scorer.score("faithfulness", "Who built the bridge?", "The Sorrel Bridge [1].", [long_context], None)
    assert outcome.value is None and outcome.failure == "too_long"
    assert scorer.score("faithfulness", "Who built the bridge?", "The Sorrel Bridge [1].",
                        ["The Sorrel Bridge was built in 1850."], None).value is not None


@pytest.mark.slow
def test_the_real_model_says_prompt_too_long_and_counts_tokens(small_llm):
    from tuner.models.llms import PromptTooLong

    assert small_llm.context_window == 4096
    assert 5 <= small_llm.count_tokens("Who built the Sorrel Bridge in 1850?") <= 15
    with pytest.raises(PromptTooLong, match="raise generator/judge n_ctx"):
        small_llm.chat([{"role": "user", "content": "bridge " * 5000}], max_tokens=8)


@pytest.mark.parametrize("server", ["sqlite", "postgresql"])
def test_a_database_whose_tuner_records_table_is_another_application_s_is_one_line(tmp_path, server, request):
    """Every other foreign-database case was one line; a `tuner_records` table of another shape gave two
    tracebacks (`column tuner_records.key does not exist`)."""
    import sqlalchemy

    url = f"sqlite:///{tmp_path / 'app.db'}" if server == "sqlite" else request.getfixturevalue("postgres_url")
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as db:
        db.exec_driver_sql("CREATE TABLE tuner_records (id INTEGER PRIMARY KEY, title TEXT)")
        db.exec_driver_sql("INSERT INTO tuner_records VALUES (1, 'not ours')")
    engine.dispose()
    result = tuner("optimize", "--storage", url, "--target", "recall@5", "--trials", "1", "--limit", "2",
                   "--study", "s", cwd=tmp_path)
    one_line_error(result, "table tuner_records is another application's", "columns id, title",
                   "give tuner a database of its own")
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as db:  # their data is left as it was
        assert db.exec_driver_sql("SELECT title FROM tuner_records").all() == [("not ours",)]
    engine.dispose()


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


@pytest.mark.slow
def test_a_kill_during_real_embedding_keeps_the_slices_written(tmp_path, real_embedder):
    """The same with all-MiniLM-L6-v2: the run stops (as Ctrl-C would) inside the second slice, after the first
    was written; the next run embeds only what was not written, and the vectors are the model's."""
    from tuner.models.embedders import CachedEmbedder
    from tuner.models.embedders._cache import WRITE_EVERY

    model = real_embedder.inner
    texts = [f"Passage {i} describes the harbour of town number {i}." for i in range(WRITE_EVERY + 40)]
    done = 0

    def stop_in_the_second_slice(count: int) -> None:
        nonlocal done
        done += count
        if done > WRITE_EVERY:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        CachedEmbedder(model, tmp_path).encode(texts, on_progress=stop_in_the_second_slice)
    again = CachedEmbedder(model, tmp_path)
    vectors = again.encode(texts)
    assert again.misses == 40  # the first 256 came from the store
    # bf16 (precision auto on a CPU with it) rounds a little differently in another batch: cosine, not digits
    np.testing.assert_allclose(np.sum(vectors[:3] * model.encode(texts[:3]), axis=1), 1.0,
                               atol=1e-6 if model.precision == "fp32" else 1e-4)
