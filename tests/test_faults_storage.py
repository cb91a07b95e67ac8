"""Storage faults: torn journals and study files, stale locks, damaged caches, kills during writes, resumes that
would measure something else. Each case asserts the exit code, one line on stderr, no traceback, and that the
study's completed trials are intact afterwards."""

from __future__ import annotations

import json
import time

import numpy as np
import optuna
import pytest
import yaml

from tests.fakes import HashingEmbedder, ScriptedLLM
from tests.helpers import SPACE, TORN, complete, one_line_error, open_session, tuner
from tuner.cache import SqliteStore
from tuner.errors import ConfigError
from tuner.study.results import load_study, trial_states
from tuner.study.storage import StudyFolder, journal_lock, release_stale_lock, repair_journal, study_folder


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


def test_a_torn_study_json_is_rebuilt_from_the_journal_or_named_in_one_line(study_of_two, tmp_path):
    before = study_of_two.read_meta()
    whole = study_of_two.meta.read_text()
    study_of_two.meta.write_text(whole[: len(whole) // 2])  # what a non-atomic write cut by a kill left
    where = ("--study", "s", "--studies-dir", str(study_of_two.root.parent))
    shown = tuner("trials", *where, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "study.json was unreadable" in shown.stderr and "rebuilt from the copy in journal.log" in shown.stderr
    assert study_of_two.read_meta() == before and complete(study_of_two) == 2
    # without the journal there is nothing to rebuild from: one line naming the file
    study_of_two.meta.write_text(whole[: len(whole) // 2])
    study_of_two.journal.rename(study_of_two.root / "journal.kept")
    one_line_error(tuner("trials", *where, cwd=tmp_path), "study.json: unreadable")


WRITER = """
import sys
from pathlib import Path
from tuner.study.storage import StudyFolder
from tuner.study.meta import StudyMeta
folder = StudyFolder(Path(sys.argv[1]))
metas = [StudyMeta(("faithfulness",), search_space=letter * 200_000) for letter in "ab"]
print("ready", flush=True)
while True:
    for meta in metas:
        folder.write_meta(meta)
"""


def test_a_kill_during_the_study_json_write_leaves_the_old_file_or_the_new_one(tmp_path):
    import random
    import signal
    import subprocess
    import sys

    folder = study_folder(tmp_path, "s")
    for _ in range(8):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder.root)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline() == "ready\n"
        time.sleep(random.uniform(0.05, 0.4))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        meta = folder.read_meta()  # never a torn file: one of the two written whole
        assert meta is not None and meta.search_space in ("a" * 200_000, "b" * 200_000)


@pytest.fixture(params=["folder", "sqlite", "postgresql"])
def empty_study(request, tmp_path):
    """A study's place in each mode: a folder, or a database (SQLite; PostgreSQL where the test server runs)."""
    if request.param == "folder":
        return study_folder(tmp_path, "s")
    sqlite = f"sqlite:///{tmp_path / 'studies.db'}"
    return study_folder(tmp_path, "s", sqlite if request.param == "sqlite" else request.getfixturevalue("postgres_url"))


def test_the_documents_contract_holds_in_a_folder_and_in_a_database(empty_study, study_of_two):
    documents = empty_study.documents
    assert documents.get("judge_check.json") is None and empty_study.read_meta() is None
    documents.put("judge_check.json", {"judges": [1, "é"]})
    assert documents.get("judge_check.json") == {"judges": [1, "é"]}
    documents.put("judge_check.json", {"judges": []})  # a second write replaces the first whole
    assert empty_study.read_doc("judge_check.json") == {"judges": []}
    assert "s" in documents.where("meta")
    # a study's records, as a real study wrote them, go through and come back equal
    meta, record = study_of_two.read_meta(), study_of_two.read_trial(0)
    empty_study.write_meta(meta)
    empty_study.write_trial(record)
    empty_study.write_trial(record, held_out=True)
    assert empty_study.read_meta() == meta
    assert empty_study.read_trial(0) == record == empty_study.read_trial(0, held_out=True)
    assert empty_study.read_trial(1) is None
    # a log: items in the order appended, each with its position; another reader sees them all
    assert documents.items("labels.jsonl") == []
    documents.append("labels.jsonl", {"key": "a", "supported": True})
    documents.append("labels.jsonl", {"key": "a", "supported": False})
    assert documents.items("labels.jsonl") == [(1, {"key": "a", "supported": True}), (2, {"key": "a",
                                                                                         "supported": False})]
    again = StudyFolder(empty_study.root, empty_study.storage).documents  # another process's reader
    assert again.items("labels.jsonl")[-1] == (2, {"key": "a", "supported": False})


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
    assert "answer_relevancy" in study_folder(tmp_path / "studies", "night").read_trial(1).result.metrics
    refused = invoke("optimize", "--limit", "2", "--study", "night", "--trials", "3", "--search-space", "quick")
    assert isinstance(refused.exception, ConfigError) and "searched another space" in str(refused.exception)
    assert len(load_study(study_folder(tmp_path / "studies", "night")).trials) == 2


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
