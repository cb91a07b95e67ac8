"""Human labels on a study: which answers are shown, the labelling session at a real terminal (tmux: keys in, labels
file out, resume after a kill), CSV round trip, and verdicts and reports corrected by the labels (PPI)."""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.fakes import HashingEmbedder
from tests.helpers import NOISE_SPACE, SAMPLED, CoinFlipJudge, noise_study, tuner
from tuner.analysis import analyze
from tuner.analysis.corrections import PLAN_FILE, corrections, keep_plan
from tuner.analysis.labelling import answers_to_label, labelling_plan, progress
from tuner.analysis.regression_gate import gate
from tuner.analysis.verdict import give_verdict, verdict
from tuner.config import ProjectConfig
from tuner.errors import ConfigError
from tuner.evaluation.judge import cut as judge_cut_module
from tuner.evaluation.labels import LABELS_FILE, Label, append, fingerprint, read
from tuner.models.provider import Models
from tuner.models.registry import OnPeople
from tuner.reports.markdown import render
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec
from tuner.study.storage import study_folder


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A coin-flip-judged study (no configuration truly better) whose verdict trials are scored on held-out."""
    base = tmp_path_factory.mktemp("labels")
    session = noise_study(base, HashingEmbedder(), CoinFlipJudge(), trials=6)
    with pytest.raises(ConfigError, match="not scored yet: run `tuner best --study noise --verdict` first"):
        answers_to_label(read_study(session.folder), 10)
    give_verdict(read_study(session.folder), session.runner())
    return base / "studies"


@pytest.fixture
def judged(scored, tmp_path):
    """The scored study, copied for one test (its labels are its own)."""
    shutil.copytree(scored, tmp_path / "studies")
    return read_study(study_folder(tmp_path / "studies", "noise"))


def test_the_sample_covers_the_verdicts_trials_on_held_out_and_shows_an_answer_once(judged):
    items = answers_to_label(judged, 1000)
    trials = {judged.baseline.number, judged.best.number}
    assert {n for item in items for n in item.trials} >= trials
    assert all(item.held_out and item.result.id in judged.split.holdout_ids for item in items)
    assert len({item.key for item in items}) == len(items)  # identical answers of several trials merged
    assert {item.result.id for item in items} == judged.split.holdout_ids
    assert answers_to_label(judged, 1000) == items  # the same order every time: a session resumes into it
    first = answers_to_label(judged, 3)
    assert 3 <= len(first) < len(items) and first == items[:len(first)]  # whole questions, a prefix of the order


def label_all(view, supported_of) -> None:
    for item in answers_to_label(view, 1000):
        append(view.folder.root / LABELS_FILE, Label.of(item.result, supported_of(item), item.trials[0]))


def test_labels_correct_the_verdict_and_the_report_says_when_they_change_it(judged):
    plain = verdict(judged)
    assert plain.corrections is None and not plain.holds  # the coin-flip judge cannot tell the configurations apart
    best, baseline = judged.best.number, judged.baseline.number
    baseline_keys = {fingerprint(q) for q in judged.baseline.held_out.questions}
    # a person finds every answer of the best supported and every other answer of the baseline not
    label_all(judged, lambda item: item.key not in baseline_keys or best in item.trials)
    view = read_study(judged.folder)
    said = verdict(view)
    fixed = said.corrections
    assert fixed is not None and fixed.labels == len(answers_to_label(view, 1000))
    every = fixed.means[f"trial {best}"]  # every answer labelled supported, pulled to the middle by the pseudo-labels
    assert every.estimate == pytest.approx((every.labelled + 2) / (every.labelled + 4)) and every.labelled >= 5
    human_gain = sum(fingerprint(q) not in {fingerprint(b) for b in view.best.held_out.questions}
                     for q in view.baseline.held_out.questions)
    assert fixed.difference.estimate == pytest.approx(human_gain / (fixed.difference.labelled + 4))
    assert said.corrected is fixed.difference
    assert said.holds == (fixed.difference.ci[0] > 0) and said.holds  # the verdict reads the labels
    assert "Corrected by" in said.sentence() and "The labels change the verdict" in said.sentence()
    assert fixed.agreement.answers == fixed.labels and 0 <= fixed.agreement.accuracy <= 1
    report = render(analyze(view), {})
    assert "### Corrected by human labels" in report and "the labels change it" in report
    assert f"trial {baseline}" in report or "baseline" in report


def test_labels_asked_under_the_plan_correct_the_verdict_by_its_labelled_run_of_draws(judged):
    """A session asks whole questions in the order the plan first draws them; the verdict reads the draws up to the
    first question still without labels (a question whose best and baseline answers are the same needs none)."""
    plan = labelling_plan(judged, 1000)
    keep_plan(judged.folder, plan)
    items = answers_to_label(judged, 1000)
    order = list(dict.fromkeys(item.result.id for item in items))
    assert order == list(dict.fromkeys(plan.draws)) and set(order) == judged.split.holdout_ids
    best = {q.id: fingerprint(q) for q in judged.best.held_out.questions}
    alike = {q.id for q in judged.baseline.held_out.questions if best[q.id] == fingerprint(q)}
    asked = order[:-2]  # all but the last two questions drawn
    assert len(asked) >= 5, "the fixture holds out too few questions to leave some unlabelled"
    for item in items:
        if item.result.id in asked:  # the best's answers supported, the others not
            append(judged.folder.root / LABELS_FILE,
                   Label.of(item.result, judged.best.number in item.trials, item.trials[0]))
    view = read_study(judged.folder)
    difference = verdict(view).corrections.difference
    run = next(i for i, q in enumerate(plan.draws) if q not in asked and q not in alike)
    assert difference.draws == run and difference.labelled == len(set(plan.draws[:run]))
    assert difference.estimate > 0 and difference.judged == len(order)
    assert f"asked where they decide: the labelling plan's first {run} draws" in verdict(view).sentence()
    standing = progress(view, view.labels, plan)
    assert standing.startswith(f"trial {judged.best.number} − baseline, corrected by {difference.labelled} labelled "
                               f"questions: {difference.estimate:+.2f}")


def test_too_few_labels_give_no_corrected_figure_and_say_so(judged):
    item = answers_to_label(judged, 1)[0]
    append(judged.folder.root / LABELS_FILE, Label.of(item.result, True, item.trials[0]))
    said = verdict(read_study(judged.folder))
    assert said.corrections is not None and said.corrections.difference is None and said.corrected is None
    assert "too few to correct" in said.sentence()
    assert said.holds == (said.headline.verdict == "better")  # the judge's figure stands


def test_corrections_pair_answers_by_identity_across_runs(judged):
    """`tuner compare` runs are not trials: a label reaches any run that gave the same answer on the same contexts."""
    baseline = judged.baseline.held_out
    label_all(judged, lambda item: True)
    labels = read(judged.folder.root / LABELS_FILE)
    again = replace(baseline, questions=tuple(baseline.questions))  # another run, same answers
    fixed = corrections(baseline, again, labels)
    assert fixed.difference.estimate == pytest.approx(0.0) and fixed.means["reference"].estimate > 0.8
    assert fixed.means["reference"].ci[1] == 1.0  # every label supported: the interval ends where faithfulness does
    assert corrections(baseline, again, {}) is None


def test_export_then_import_round_trips_and_bad_input_is_one_line(judged, tmp_path):
    exported = tmp_path / "to_label.csv"
    result = tuner("judge", "label", "--study", "noise", "--n", "4", "--export", str(exported), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(exported.open(encoding="utf-8")))
    assert len(rows) >= 4 and all(r["answer"] is not None and r["key"] for r in rows)
    assert judged.folder.read_doc(PLAN_FILE)["draws"]  # the rows are in the plan's order: its labels read by it
    rows[0]["supported"], rows[1]["supported"] = "y", "no"
    for row in rows[2:]:
        row["supported"] = "s"
    with exported.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = tuner("judge", "label", "--study", "noise", "--import", str(exported), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    labels = read(judged.folder.root / LABELS_FILE)
    assert [labels[r["key"]].supported for r in rows[:3]] == [True, False, None]
    (tmp_path / "team.csv").write_text(f"trial,question,supported\n{judged.baseline.number},nope,y\n")
    bad = tuner("judge", "label", "--study", "noise", "--import", str(tmp_path / "team.csv"), cwd=tmp_path)
    assert bad.returncode != 0 and "team.csv:2: names no answer of this study" in bad.stderr
    assert "Traceback" not in bad.stderr and read(judged.folder.root / LABELS_FILE) == labels
    piped = tuner("judge", "label", "--study", "noise", cwd=tmp_path)  # no terminal here
    assert piped.returncode != 0 and "--export FILE" in piped.stderr and "Traceback" not in piped.stderr


def screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def wait_for(session: str, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(session)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared on the terminal:\n{screen(session)}")


def start_session(start: list[str], command: str) -> None:
    """tmux new-session, again while refused: killing the last session takes the tmux server down, and a client that
    connects as it goes is told "server exited unexpectedly"."""
    for _ in range(20):
        started = subprocess.run([*start, command], capture_output=True, text=True)
        if started.returncode == 0:
            return
        time.sleep(0.25)
    raise AssertionError(f"tmux would not start a session: {started.stderr}")


def keys(session: str, *pressed: str) -> None:
    for key in pressed:
        subprocess.run(["tmux", "send-keys", "-t", session, key], check=True)
        time.sleep(0.3)


def test_keys_typed_while_a_screen_is_drawn_are_read_in_order_not_dropped():
    """A key typed before the session reads (the screen still drawing) is kept, and two keys typed at once are two
    keys: click.getchar flushed the first and read the second as one unknown "sq"."""
    import os
    import pty
    import termios

    from tuner.cli.judge import keypresses

    terminal, session = pty.openpty()
    try:
        os.write(terminal, b"y")  # typed ahead, in the terminal's line mode
        time.sleep(0.2)  # a pty hands input to the line discipline asynchronously
        before = termios.tcgetattr(session)
        with keypresses(session) as next_key:
            os.write(terminal, "sq\u00e9".encode())
            assert [next_key() for _ in range(4)] == ["y", "s", "q", "\u00e9"]
            assert not termios.tcgetattr(session)[3] & termios.ECHO  # keys are not echoed over the screen
        assert termios.tcgetattr(session) == before  # the terminal given back as it was
        with keypresses(session) as next_key, pytest.raises(EOFError):
            os.close(terminal)
            next_key()  # the terminal hung up: the session ends as with q, and leaving it raises nothing else
    finally:
        os.close(session)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (Debian package tmux)")
def test_the_labelling_session_at_a_terminal_keys_in_labels_out_and_resume_after_a_kill(judged, tmp_path):
    path = judged.folder.root / LABELS_FILE
    items = answers_to_label(judged, 4)
    command = shlex.join([sys.executable, "-m", "tuner", "judge", "label", "--study", "noise", "--n", "4"])
    session = f"tuner-label-{tmp_path.name}"
    start = ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "60", "-c", str(tmp_path)]
    start_session(start, f"{command}; sleep 30")
    try:
        first = wait_for(session, f"answer 1 of {len(items)}")
        assert "go on: too few labels to correct the difference yet" in first  # where the verdict stands
        assert judged.folder.read_doc(PLAN_FILE)["draws"]  # the plan kept before the first label
        keys(session, "y")
        wait_for(session, f"answer 2 of {len(items)}")
        keys(session, "n", "b")  # back to answer 2: it shows its label
        wait_for(session, "labelled not supported")
        keys(session, "y")  # relabelled
        wait_for(session, f"answer 3 of {len(items)}")
        labels = read(path)
        assert [labels[i.key].supported for i in items[:2]] == [True, True] and items[2].key not in labels
        subprocess.run(["tmux", "kill-session", "-t", session], check=True)  # killed mid-session
        start_session(start, f"{command}; sleep 30")
        wait_for(session, f"answer 3 of {len(items)}")  # resumed at the first answer without a label
        keys(session, "s", "q")
        shown = wait_for(session, "resumes")  # the summary's end: the screen is read once it is whole
        assert "answers labelled" in shown
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    labels = read(path)
    assert [labels[i.key].supported for i in items[:3]] == [True, True, None] and items[3].key not in labels
    assert sum(1 for line in path.read_text().splitlines() if line.strip()) == 4  # every key written at once


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (Debian package tmux)")
@pytest.mark.parametrize("stop, code, said", [("C-c", 130, "interrupted: stopping"),
                                              ("TERM", 143, "interrupted by SIGTERM: stopping"),
                                              ("HUP", 129, "")])  # after SIGHUP nobody may be there to read it
def test_a_stop_signal_ends_the_labelling_session_as_an_interruption_with_its_labels_kept(judged, tmp_path, stop,
                                                                                          code, said):
    path = judged.folder.root / LABELS_FILE
    items = answers_to_label(judged, 4)
    command = shlex.join([sys.executable, "-m", "tuner", "judge", "label", "--study", "noise", "--n", "4"])
    session = f"tuner-stop-{tmp_path.name}"
    start = ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "60", "-c", str(tmp_path)]
    # the shell writes the session's pid, then becomes it; stderr to a file, then the exit code and the terminal's
    # echo flag ("echo", or "-echo" if left off) on one line, ended by a mark so the screen is read once it is whole
    start_session(start, f"sh -c 'echo $$ > pid; exec {command} 2> stderr.txt'; "
                         "echo EXIT=$? $(stty -a | grep -o -- '-*echo ' | head -1) END; sleep 30")
    try:
        wait_for(session, f"answer 1 of {len(items)}")
        keys(session, "y")
        wait_for(session, f"answer 2 of {len(items)}")
        if stop == "C-c":
            keys(session, "C-c")
        else:
            subprocess.run(["kill", f"-{stop}", (tmp_path / "pid").read_text().strip()], check=True)
        shown = wait_for(session, " END")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert f"EXIT={code} echo END" in shown  # the exit code, and the terminal given back with its echo on
    printed = (tmp_path / "stderr.txt").read_text()
    assert said in printed and "1 of 4 answers labelled" in printed and "Traceback" not in printed
    assert list(read(path)) == [items[0].key]


def test_judge_check_against_the_labels_scores_every_labelled_answer_with_the_judge(judged, cli_with, tmp_path,
                                                                                   monkeypatch):
    """`tuner judge check --labels`: the same table as the built cases, from people's verdicts; a judge measured on
    the development set is said to be, with how far its constructed cases overstate it."""
    monkeypatch.setattr(judge_cut_module, "as_judge", lambda judge, setting: OnPeople(0.8, 0.7, 0.9, 304) if (
        judge, setting) == ("scripted", "graded, sentences, numbered") else None)  # the scripted judge, measured
    label_all(judged, lambda item: judged.best.number in item.trials)
    labels_file = judged.folder.root / LABELS_FILE
    labels = read(labels_file)
    invoke = cli_with(CoinFlipJudge())
    result = invoke("judge", "check", "--labels", str(labels_file), "--agreement", "0", "--out", "check.json")
    assert result.exit_code == 0, result.output
    checked = json.loads((tmp_path / "check.json").read_text())["judges"][0]
    faithfulness = checked["metrics"]["faithfulness"]
    supported = sum(label.supported for label in labels.values())
    assert faithfulness["supported"]["cases"] == supported
    assert faithfulness["unsupported"]["cases"] == len(labels) - supported
    assert {c["kind"] for c in checked["cases"]} == {"labelled_supported", "labelled_unsupported"}
    assert "faithfulness" in result.output and "AUC" in result.output
    # with labels, the judge's cut comes from them: said as a setting to copy
    cut = faithfulness["cut"]
    printed = " ".join(result.output.split())
    assert f"set evaluation.cut: {cut:.2f} to read its scores there" in printed
    assert ("on 304 real answers people labelled (RAGTruth), this judge (graded, sentences, numbered) scored AUC 0.70 "
            "where "
            "the check's kinds of case built from them gave 0.90: the check's AUC reads about 0.20 above what real "
            "answers give") in printed
    skipped = tmp_path / "skips.jsonl"
    append(skipped, Label.of(judged.best.held_out.questions[0], None, judged.best.number))
    result = invoke("judge", "check", "--labels", str(skipped))
    assert result.exit_code != 0 and "no label says supported or not" in str(result.exception)


def test_the_compare_gate_reads_the_corrected_faithfulness(judged):
    """Labels finding every NEW answer unsupported turn an undecided judge into a regression (and say so)."""
    base, new = judged.baseline.held_out, judged.best.held_out
    new_keys = {fingerprint(q) for q in new.questions} - {fingerprint(q) for q in base.questions}
    assert len(new_keys) >= 5, "the fixture's best and baseline should differ on most held-out answers"
    label_all(judged, lambda item: item.key not in new_keys)
    labels = read(judged.folder.root / LABELS_FILE)
    plain, fixed = gate(["faithfulness"], base, new, 0.02), gate(["faithfulness"], base, new, 0.02, labels)
    assert not plain.failed and plain.corrections is None
    (faithfulness,) = fixed.comparisons
    assert fixed.verdict(faithfulness) == "worse" and fixed.failed == (faithfulness,)
    assert fixed.reading(faithfulness) == "regression (beyond the margin 0.02)"
    record = fixed.to_json("base.yaml", "new.yaml", len(new.questions))["metrics"][0]
    assert record["regression"] and record["corrected"]["difference"] < -0.02 and record["corrected"]["ci95"][1] < 0
    assert record["difference"] == faithfulness.mean_difference  # the judge's own figure stays beside it


def test_a_study_without_held_out_questions_is_labelled_and_corrected_in_sample(tmp_path, fake_embedder):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(NOISE_SPACE))
    session = Session.open(StudySpec("whole", StudySettings(["faithfulness"], sampler="random", seed=4), space,
                                     ProjectConfig(cache_dir=tmp_path / "cache", evaluation=SAMPLED),
                                     studies_dir=tmp_path / "studies",
                                     holdout=0.0))
    session.runner(models=Models(CoinFlipJudge(), CoinFlipJudge()), embedder=fake_embedder)
    session.run(4)
    view = read_study(session.folder)
    items = answers_to_label(view, 1000)
    assert items and not any(item.held_out for item in items)  # the search answers: nothing is held out
    assert {item.result.id for item in items} == {q.id for q in session.search_questions}
    label_all(view, lambda item: True)
    analysis = analyze(read_study(session.folder))
    assert analysis.verdict is None and analysis.corrections is not None
    assert view.best.number != view.baseline.number  # the coin flips favoured a trial (seeded)
    assert analysis.corrections.difference is not None and "Corrected by" in render(analysis, {})


def test_labels_that_fit_no_answer_compared_are_said_not_dropped(judged):
    """Labels given to other answers (a study run again since): the verdict and the report say none applies."""
    from tests.helpers import answer

    append(judged.folder.root / LABELS_FILE, Label.of(answer("q-elsewhere", "Another answer."), True, 0))
    view = read_study(judged.folder)
    said = verdict(view)
    assert said.corrections is None and said.labels_given == 1
    assert "None of the 1 human label(s) given belongs to an answer compared here" in said.sentence()
    report = render(analyze(view), {})
    assert "### Corrected by human labels" in report and "None of the 1 human label(s) given" in report
    from tuner.cli import compare
    from tuner.ui import console

    base, new = view.baseline.held_out, view.best.held_out
    given = read(judged.folder.root / LABELS_FILE)
    with console.capture() as shown:  # `tuner compare --labels` with labels of other answers
        compare.show(gate(["faithfulness"], base, new, 0.02, given), Path("base.yaml"), Path("new.yaml"),
                     len(new.questions), given)
    assert "None of the 1 human label(s) given belongs to an answer compared here" in shown.get()


def test_the_baseline_is_one_row_of_the_labels_table_and_export_leaves_labelled_answers_out(judged, tmp_path):
    label_all(judged, lambda item: True)
    view = read_study(judged.folder)
    report = render(analyze(view), {})
    assert f"| trial {view.baseline.number} |" not in report  # it is the table's "baseline" row
    assert all(c.trial.number != view.baseline.number for c in verdict(view).contenders)
    exported = tmp_path / "left.csv"
    result = tuner("judge", "label", "--study", "noise", "--n", "4", "--export", str(exported), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert list(csv.DictReader(exported.open(encoding="utf-8"))) == []  # every answer drawn is labelled already
    assert result.stderr.startswith("0 answers to label written") and "labelled already" in result.stderr
