"""`tuner optimize` for real: the 0.5B model on 4 demo questions (2 searched, 2 held out), killed with SIGKILL
mid-trial and resumed.

Checks the promises a user leaving a study overnight relies on: nothing completed is lost, the interrupted
trial runs again, no LLM call is paid twice, no trial sees a held-out question, the verdict judges the best on
the held-out ones, and `tuner best` gives a config `tuner eval --split` re-scores from cache on either part.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from tests.helpers import tuner
from tuner.cache import SqliteStore

pytestmark = pytest.mark.slow
QUICK = str(Path(__file__).resolve().parents[1] / "search_spaces" / "quick.yaml")


def entries(cache_file: Path) -> int:
    return len(SqliteStore(cache_file)) if cache_file.is_file() else 0


def test_optimize_killed_and_resumed_repeats_no_llm_call(tmp_path, small_gguf):
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump(
        {"generator": {"model": "qwen2.5-0.5b", "path": str(small_gguf)}, "dataset": {"limit": 4}}))
    command = ["optimize", "--target", "faithfulness", "--trials", "3", "--search-space", QUICK,
               "--config", "tuner.yaml", "--study", "ci", "--sampler", "random", "--seed", "3", "--holdout", "0.5"]
    study_dir = tmp_path / "studies" / "ci"
    cache_file = tmp_path / "studies" / ".cache" / "llm_calls.sqlite"  # shared by the studies of a project

    first = subprocess.Popen([sys.executable, "-m", "tuner", *command], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 900
    while not (study_dir / "trials" / "0000.json").is_file():  # the baseline trial finished
        assert first.poll() is None and time.time() < deadline, first.stderr.read() if first.poll() else "timeout"
        time.sleep(0.5)
    after_baseline = entries(cache_file)
    while entries(cache_file) == after_baseline:  # the next trial has paid for at least one call
        assert first.poll() is None and time.time() < deadline, "the study ended before it could be killed"
        time.sleep(0.2)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    paid_before_kill = entries(cache_file)

    resumed = tuner(*command, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "interrupted and run again" in resumed.stderr
    assert "; best faithfulness=" in resumed.stderr and "program=" in resumed.stderr  # the log names each trial

    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(study_dir / "journal.log")))
    study = optuna.load_study(study_name="ci", storage=storage)
    finished = study.get_trials(states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
    assert len(finished) == 3
    assert study.trials[0].user_attrs["baseline"] and study.trials[0].state == optuna.trial.TrialState.COMPLETE
    failed = study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert len(failed) == 1  # the killed trial, re-run with the same parameters
    assert any(t.params == failed[0].params and t.user_attrs.get("rerun_of") == failed[0].number for t in finished)
    listing = tuner("trials", "--study", "ci", cwd=tmp_path).stdout
    assert "interrupted" in listing and f"(re-run of {failed[0].number})" in listing
    cache = SqliteStore(cache_file)
    assert cache.repeated() == 0, "a resumed study paid for an LLM call twice"
    assert len(cache) >= paid_before_kill
    for trial in finished:
        assert (study_dir / "trials" / f"{trial.number:04d}.json").is_file()

    split = json.loads((study_dir / "study.json").read_text())["split"]
    held_out = set(split["holdout_ids"])
    assert len(held_out) == 2
    for trial in finished:  # the search never saw a held-out question
        recorded = json.loads((study_dir / "trials" / f"{trial.number:04d}.json").read_text())["per_question"]
        assert len(recorded) in (1, 2) and not {q["id"] for q in recorded} & held_out
    best = max((t for t in finished if t.state == optuna.trial.TrialState.COMPLETE), key=lambda t: t.value)
    judged = json.loads((study_dir / "holdout" / f"{best.number:04d}.json").read_text())  # the verdict ran
    assert {q["id"] for q in judged["per_question"]} == held_out
    assert (study_dir / "holdout" / "0000.json").is_file()  # the baseline too
    report = (tmp_path / "reports" / "ci" / "report.md").read_text()
    assert "held-out" in report
    check = json.loads((study_dir / "judge_check.json").read_text())["judges"][0]  # the judge, checked before trial 0
    assert check["questions"] and not set(check["questions"]) & held_out
    assert "## Judge check" in report
    baseline_held = json.loads((study_dir / "holdout" / "0000.json").read_text())["per_question"]
    def scored(records):  # ids the judge gave a faithfulness score (NaN is stored as null)
        return {q["id"] for q in records if q["scores"].get("faithfulness") is not None}
    if best.number == 0:
        assert "baseline stayed the best" in resumed.stdout
    elif scored(judged["per_question"]) & scored(baseline_held):  # a paired held-out difference exists
        assert "never saw" in resumed.stdout
    else:  # the 0.5B judge may give NaN on both held-out questions: the verdict must say so, not invent a gain
        assert "No held-out question was scored on faithfulness" in resumed.stdout

    assert tuner("best", "--study", "ci", "--out", "best.yaml", cwd=tmp_path).returncode == 0
    for part, expected in (("search", best.value), ("holdout", judged["metrics"]["faithfulness"])):
        rescored = tuner("eval", "--config", "best.yaml", "--split", part, "--out", f"{part}.json", cwd=tmp_path)
        assert rescored.returncode == 0, rescored.stderr
        assert "Traceback" not in rescored.stderr
        data = json.loads((tmp_path / f"{part}.json").read_text())
        assert data["cost"]["llm_calls"] == 0  # both parts come back from the study's cache
        assert data["metrics"]["faithfulness"] == (None if expected is None else pytest.approx(expected))
    assert tuner("best", "--study", "ci", "--verdict", cwd=tmp_path).returncode == 0  # already judged: no model

    # people's labels of the held-out answers, given elsewhere (--export, --import): the verdict counts them, and the
    # real judge is checked against them (its calls on these answers come back from the study's cache)
    exported = tmp_path / "to_label.csv"
    assert tuner("judge", "label", "--study", "ci", "--export", str(exported), cwd=tmp_path).returncode == 0
    rows = list(csv.DictReader(exported.open(encoding="utf-8")))
    assert rows and {r["question_id"] for r in rows} == held_out
    with exported.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "supported": "y" if i % 2 == 0 else "n"} for i, r in enumerate(rows))
    imported = tuner("judge", "label", "--study", "ci", "--import", str(exported), cwd=tmp_path)
    assert imported.returncode == 0 and f"{len(rows)} label(s) imported" in imported.stderr
    relabelled = tuner("best", "--study", "ci", "--verdict", cwd=tmp_path)
    assert relabelled.returncode == 0 and (best.number == 0 or "human label" in relabelled.stdout)
    checked = tuner("judge", "check", "--labels", str(study_dir / "labels.jsonl"), "--config", "tuner.yaml",
                    "--agreement", "0", "--out", "labels-check.json", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    cases = json.loads((tmp_path / "labels-check.json").read_text())["judges"][0]["cases"]
    assert len(cases) == len(rows) and {c["kind"] for c in cases} <= {"labelled_supported", "labelled_unsupported"}

    listing = tuner("studies", cwd=tmp_path)
    assert listing.returncode == 0 and "ci" in listing.stdout
    assert tuner("trials", "--study", "ci", cwd=tmp_path).returncode == 0

    # a second study on the same project shares the cache: it re-embeds no chunk, and its baseline (the first
    # study's baseline, now on all four questions: two searched, two held out there) pays no LLM call
    second = tuner("optimize", "--target", "faithfulness", "--trials", "1", "--search-space", QUICK,
                   "--config", "tuner.yaml", "--study", "ci2", "--holdout", "0", "--judge-check", "off", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    chunks = re.search(r"index: (\d+) chunks, 0 embedded now, (\d+) from the cache", second.stderr)
    assert chunks and chunks[1] == chunks[2], second.stderr
    baseline = json.loads((tmp_path / "studies" / "ci2" / "trials" / "0000.json").read_text())
    assert len(baseline["per_question"]) == 4 and baseline["cost"]["llm_calls"] == 0
    assert not (tmp_path / "studies" / "ci2" / "cache").exists()

    # the same project as a Pareto study of faithfulness and seconds per question: the cache knows what each call
    # cost when it was paid, so a trial served from it is not "free"
    pareto = tuner("optimize", "--target", "faithfulness", "--target", "seconds_per_question", "--trials", "2",
                   "--search-space", QUICK, "--config", "tuner.yaml", "--study", "pareto", "--holdout", "0.5",
                   "--judge-check", "off", cwd=tmp_path)
    assert pareto.returncode == 0, pareto.stderr
    study = optuna.load_study(study_name="pareto", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "studies" / "pareto" / "journal.log"))))
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert complete and all(t.values[1] > 0.2 for t in complete)  # seconds of a real 0.5B answer, cached or not
    report = (tmp_path / "reports" / "pareto" / "report.md").read_text()
    assert "**Pareto study** over faithfulness, seconds_per_question" in report
    assert "Cheapest within noise of the best" in report
    # and what a longer study would cost, told before it starts, from the cache: nothing paid
    told = tuner("optimize", "--config", "tuner.yaml", "--study", "next", "--trials", "20", "--estimate",
                 cwd=tmp_path)
    assert told.returncode == 0, told.stderr
    assert "20 trial(s) × 4 search questions" in told.stdout and "0 call(s) paid now for trial 0" in told.stdout
    assert "Trial 1 is the sampler's first draw" in told.stdout  # measured after trial 0, as the study runs it
    assert re.search(r"wall time, trial 1\s*│\s*[\d.]+ s", told.stdout), told.stdout
    calls = re.search(r"LLM calls\s*│\s*([\d.]+)\s*│\s*([\d,]+)", told.stdout)
    assert calls and float(calls[1]) > 0, told.stdout
    assert not (tmp_path / "studies" / "next").exists()  # an estimate starts nothing


def test_a_trial_that_changes_only_the_program_computes_little_more_than_the_instructions(tmp_path, small_gguf):
    """Trial 1 asks the baseline's questions over the same passages under the other program: the answer resumes
    the passages' state trial 0 left (passages first), the judge resumes its contexts; the trials table says how
    many prompt tokens each trial computed of those it sent."""
    from tuner.study.storage import study_folder

    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump(
        {"generator": {"model": "qwen2.5-0.5b", "path": str(small_gguf)}, "dataset": {"limit": 2},
         "answer_layout": "passages-first"}))
    (tmp_path / "programs.yaml").write_text(yaml.safe_dump(
        {"params": {"program": {"type": "categorical", "choices": ["default", "strict"]}}}))
    ran = tuner("optimize", "--target", "faithfulness", "--trials", "2", "--search-space", "programs.yaml",
                "--config", "tuner.yaml", "--study", "p", "--holdout", "0", "--judge-check", "off", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    folder = study_folder(tmp_path / "studies", "p")
    baseline, other = (folder.read_trial(n).result.cost for n in (0, 1))
    assert other.llm_calls and other.prompt_tokens > 0.5 * baseline.prompt_tokens
    assert other.evaluated_tokens < 0.5 * other.prompt_tokens < baseline.evaluated_tokens
    listing = tuner("trials", "--study", "p", cwd=tmp_path).stdout
    assert "evaluated/sent" in listing and f"{other.evaluated_tokens:,}/{other.prompt_tokens:,}" in listing
