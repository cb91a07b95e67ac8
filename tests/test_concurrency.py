"""Questions in flight at once against an endpoint: more questions an hour, the same results in the same order, a
429 waited out, and no finished call paid again after a kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.fakes import FakeEndpoint
from tests.helpers import IN_FLIGHT_STUDY, endpoint_project, interruptible, signal_when, tuner
from tuner.evaluation.in_order import in_order
from tuner.models.llms._openai import OpenAICompatibleLLM
from tuner.study.results import load_study
from tuner.study.storage import study_folder


def test_results_are_handed_on_in_order_with_no_more_than_width_at_once():
    running, most, lock = [0], [0], threading.Lock()

    def work(index, item):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05 * (3 - item % 3))  # later items often finish first
        with lock:
            running[0] -= 1
        return item * 10

    seen = []
    assert in_order(work, list(range(12)), 4, lambda index, result: seen.append((index, result))) == \
        [i * 10 for i in range(12)]
    assert seen == [(i, i * 10) for i in range(12)] and most[0] == 4
    assert in_order(work, [1, 2], 1) == [10, 20]  # width 1: in the calling thread


def test_a_failure_comes_in_its_turn_and_a_stop_waits_for_the_work_in_flight():
    def fails_at_three(index, item):
        time.sleep(0.01 if index == 3 else 0.05)
        if index == 3:
            raise ValueError("question 3")
        return item

    handed = []
    with pytest.raises(ValueError, match="question 3"):
        in_order(fails_at_three, list(range(8)), 4, lambda index, result: handed.append(index))
    assert handed == [0, 1, 2]  # the failure of 3 is raised after 0-2 were handed on, not when it happened

    finished = []

    def slow(index, item):
        time.sleep(0.2)
        finished.append(index)
        return item

    def prune(index, result):
        raise RuntimeError("pruned")

    with pytest.raises(RuntimeError, match="pruned"):
        in_order(slow, list(range(8)), 4, prune)
    assert sorted(finished) == [0, 1, 2, 3, 4]  # the ones in flight finished; none launched after the stop


def test_a_429_with_retry_after_is_waited_out():
    with FakeEndpoint("429 once", delay=2) as server:
        llm = OpenAICompatibleLLM(server.url, "m")
        began = time.monotonic()
        reply = llm.chat([{"role": "user", "content": "Who wrote it?"}])
        waited = time.monotonic() - began
    assert reply.text and len(server.bodies) == 2  # refused once, then answered
    assert 2 <= waited < 10  # the server's Retry-After, not the client's own sub-second backoff


def answered(folder) -> list[tuple]:
    """What the study recorded of each question of its finished trial, in order (everything but the time taken)."""
    where = study_folder(folder / "studies", "s")
    done = [t.number for t in load_study(where).trials if t.state.name == "COMPLETE"]
    trial = where.read_trial(done[-1])
    return [(q.id, q.answer, q.contexts, dict(q.scores), q.citations) for q in trial.result.questions]


def test_eight_in_flight_give_the_same_results_and_journal_as_one_at_a_time(tmp_path):
    # how many more questions an hour: bench/concurrency.py (a wall-clock ratio is not a test on 2 shared cores)
    with FakeEndpoint("scripted", delay=1.0) as server:  # a model's pace: the index and retrieval, a few seconds,
        runs = {}                                         # are paid once either way
        for width in (1, 8):
            folder = tmp_path / f"in_flight_{width}"
            endpoint_project(folder, server.url, width)
            result = tuner(*IN_FLIGHT_STUDY, cwd=folder)
            assert result.returncode == 0, result.stderr
            runs[width] = folder
    assert server.most_at_once == 8
    assert answered(runs[1]) == answered(runs[8])
    journals = [[(t.number, t.state, t.params, t.values) for t in load_study(study_folder(f / "studies", "s")).trials]
                for f in runs.values()]
    assert journals[0] == journals[1]


def test_kill_9_with_calls_in_flight_then_resume_pays_no_finished_call_again(tmp_path):
    with FakeEndpoint("scripted", delay=1.0) as server:
        endpoint_project(tmp_path, server.url, 8)
        process = subprocess.Popen([sys.executable, "-m", "tuner", *IN_FLIGHT_STUDY], cwd=tmp_path,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(server.answered) < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.kill()
        process.communicate()
        killed = time.monotonic()
        # a call answered just before the kill may not have reached the cache: half a second is the client's to
        # store it; a call still in flight at the kill was never received, and is asked again
        finished = {body for body, at in server.answered if at < killed - 0.5}
        asked_before = len(server.bodies)
        resumed = tuner(*IN_FLIGHT_STUDY, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(finished) >= 8
    asked_again = server.bodies[asked_before:]
    assert asked_again and not finished & set(asked_again)
    assert len(answered(tmp_path)) == 16


def test_sigterm_with_eight_calls_in_flight_stops_at_once_and_marks_the_trial(tmp_path):
    """The calls in flight are not waited for: SIGTERM stops as with one call, the trial marked, the report
    written (daemon threads die with the process)."""
    with FakeEndpoint("slow", delay=120) as server:
        endpoint_project(tmp_path, server.url, 8)
        process = interruptible([sys.executable, "-m", "tuner", *IN_FLIGHT_STUDY], tmp_path)
        # eight questions' first calls, all waiting on the server
        stderr, took = signal_when(process, lambda: len(server.bodies) >= 8, signal.SIGTERM)
    assert process.returncode == 143 and took < 5 and "Traceback" not in stderr, (took, stderr)
    assert server.most_at_once == 8
    study = load_study(study_folder(tmp_path / "studies", "s"))
    assert [t.user_attrs.get("interrupted") for t in study.trials] == ["SIGTERM"]
    assert (tmp_path / "reports" / "s" / "report.md").is_file()
