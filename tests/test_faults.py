"""Faults a user meets: damaged storage, bad input, signals. Each case asserts the exit code, one line on stderr,
no traceback, and that the study's completed trials are intact afterwards."""

from __future__ import annotations

import json

import pytest

from tests.test_cli import tuner
from tests.test_study import PROGRAMS, open_session
from tuner.study.results import load_study, trial_states
from tuner.study.storage import repair_journal

#: what a kill -9 or a power cut in the middle of Optuna's append leaves: an entry without its end
TORN = b'{"op_code":6,"worker_id":"a-b","trial_id":1,"user_attr":{"cost":{"calls'


def one_line_error(result, *words: str) -> str:
    """The failed command's stderr: exactly one line, no traceback, naming each of `words`."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def study_of_two(tmp_path, fake_embedder):
    """A finished two-trial study on the demo (scripted LLM), as a kill leaves it on disk."""
    session = open_session(tmp_path, fake_embedder, PROGRAMS, limit=2)
    session.run(2)
    return session.folder


def complete(folder) -> int:
    return trial_states(load_study(folder).get_trials(deepcopy=False)).count("complete")


def test_a_torn_journal_tail_is_set_aside_and_the_study_resumes(study_of_two, tmp_path, fake_embedder):
    journal = study_of_two.journal
    with open(journal, "ab") as f:
        f.write(TORN)
    session = open_session(tmp_path, fake_embedder, PROGRAMS, limit=2)  # the resume: repairs, then appends
    assert session.run(3) == 1
    assert complete(study_of_two) == 3
    assert journal.read_bytes().endswith(b"\n")
    assert (journal.parent / "journal.log.torn").read_bytes() == TORN + b"\n"
    listed = tuner("studies", "--studies-dir", str(tmp_path / "studies"), cwd=tmp_path)
    assert listed.returncode == 0 and "unreadable" not in listed.stdout, listed.stdout + listed.stderr


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
    one_line_error(tuner("studies", "--studies-dir", str(tmp_path / "nowhere"), cwd=tmp_path),
                   "nowhere", "no such folder")
