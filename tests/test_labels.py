"""Human labels: keyed by the answer (not the trial), appended as given, the last per answer wins, a torn last line
survives a kill, CSV/JSONL import checked row by row before anything is written."""

from __future__ import annotations

import json

import pytest

from tests.helpers import answer
from tuner.errors import DataError
from tuner.evaluation.labels import Label, append, fingerprint, import_labels, read


def test_an_answer_is_named_by_its_question_words_and_contexts():
    assert fingerprint(answer("q1", "Paris.")) == fingerprint(answer("q1", "Paris."))
    others = [answer("q2", "Paris."), answer("q1", "Lyon."), answer("q1", "Paris.", ("other ctx",))]
    assert len({fingerprint(a) for a in [answer("q1", "Paris."), *others]}) == 4


def test_labels_are_appended_and_the_last_one_wins(tmp_path):
    path = tmp_path / "labels.jsonl"
    first, second = answer("q1", "Paris."), answer("q2", "Lyon.")
    append(path, Label.of(first, True, 3))
    append(path, Label.of(second, None, 3))  # skipped
    append(path, Label.of(first, False, 5))  # relabelled (another trial gave the same answer)
    labels = read(path)
    assert {k: (v.supported, v.trial) for k, v in labels.items()} == \
        {fingerprint(first): (False, 5), fingerprint(second): (None, 3)}
    assert labels[fingerprint(first)].answer == "Paris." and labels[fingerprint(first)].contexts == ("ctx",)
    with path.open("a") as out:
        out.write('{"key": "abc", "quest')  # killed mid-write
    assert read(path) == labels
    path.write_text('not json\n{"key": "k", "question_id": "q", "supported": true}\n')
    with pytest.raises(DataError, match="labels.jsonl:1: not a JSON line"):
        read(path)


def test_labels_import_from_csv_and_jsonl_and_refuse_bad_rows(tmp_path):
    target = tmp_path / "labels.jsonl"
    answers = {(0, "q1"): answer("q1", "A."), (0, "q2"): answer("q2", "B."), (1, "q1"): answer("q1", "C.")}
    by_key = {fingerprint(a): (t, a) for (t, _), a in answers.items()}

    def resolve(key, trial, question):
        if key:
            return by_key.get(key)
        return (trial, answers[(trial, question)]) if (trial, question) in answers else None

    (tmp_path / "team.csv").write_text("trial,question,supported\n0,q1,y\n0,q2,no\n1,q1,\n")  # q1 of 1: not yet
    row = {"key": fingerprint(answers[(1, "q1")]), "supported": True}
    (tmp_path / "team.jsonl").write_text(json.dumps(row) + "\n")
    for source, count in (("team.csv", 2), ("team.jsonl", 1)):
        imported = import_labels(tmp_path / source, resolve)
        assert len(imported) == count
        for label in imported:
            append(target, label)
    assert sorted((v.trial, v.question_id, v.supported) for v in read(target).values()) == \
        [(0, "q1", True), (0, "q2", False), (1, "q1", True)]
    before = target.read_text()
    (tmp_path / "bad.csv").write_text("trial,question,supported\n0,q1,y\n0,q2,maybe\n")
    with pytest.raises(DataError, match="bad.csv:3: supported must be y, n or s"):
        import_labels(tmp_path / "bad.csv", resolve)
    (tmp_path / "gone.csv").write_text("trial,question,supported\n7,q1,y\n")
    with pytest.raises(DataError, match="gone.csv:2: names no answer of this study"):
        import_labels(tmp_path / "gone.csv", resolve)
    assert target.read_text() == before  # a bad file gives no label
    with pytest.raises(DataError, match="no such file"):
        import_labels(tmp_path / "none.csv", resolve)


def test_people_s_labels_of_real_claims_become_a_labels_file_the_judge_check_reads(tmp_path):
    """bench/ragtruth.py: RAGTruth's claim lines (a page of them: torn first and last lines) as labels; claims whose
    truth was only implied or rests on a missing reference are left out, and the validation split is refused."""
    import subprocess
    import sys
    from pathlib import Path

    from tuner.evaluation.judge.cases import label_cases

    def claim(i, hallucinated, task="QA", **extra):
        return json.dumps({"example_id": f"7:{i}", "claim": f"Claim {i} about the bridge.", "label": hallucinated,
                           "evidence": [f"Passage {i}.", "", "Another passage."], "task_type": task,
                           "generator_model": "llama-2-7b-chat", "implicit_true": False, "due_to_null": False,
                           **extra})
    page = tmp_path / "test.jsonl"
    page.write_text('"label": false, "evidence": []}\n' + "\n".join(
        [claim(0, False), claim(1, True, "Summary"), claim(2, False, implicit_true=True),
         claim(3, True, due_to_null=True), claim(4, False, "Data2txt")]) + '\n{"example_id": "7:5", "cla')
    script = Path(__file__).resolve().parents[1] / "bench" / "ragtruth.py"
    made = subprocess.run([sys.executable, str(script), str(page), "--out", str(tmp_path / "dev.jsonl")],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("2 claims (QA 1, Summary 1), 1 hallucinated (Summary 1)")
    labels = read(tmp_path / "dev.jsonl")
    assert [(k, x.supported, x.contexts) for k, x in labels.items()] == [
        ("ragtruth:7:0", True, ("Passage 0.", "Another passage.")),
        ("ragtruth:7:1", False, ("Passage 1.", "Another passage."))]
    assert [c.kind for c in label_cases(labels.values())] == ["labelled_supported", "labelled_unsupported"]
    (tmp_path / "validation.jsonl").write_text(page.read_text())
    refused = subprocess.run([sys.executable, str(script), str(tmp_path / "validation.jsonl"), "--out", "x"],
                             capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stderr.strip() == \
        "error: the validation split is the release measurement; build the development set from test.jsonl"
