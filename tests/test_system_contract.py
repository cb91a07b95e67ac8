"""The contract every kind of system keeps, run against each kind (scikit-learn's `check_estimator`, Optuna's storage
tests): replies parsed, a bad reply as one line, a refusal of the knobs, a timeout, the cache, questions asked at
once, a stop with calls in flight. A new kind is tested by adding an entry to KINDS: how to serve
tests/contract_system.py's `answer` as that kind."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import free_port
from tuner.cache import SqliteStore
from tuner.config import CommandSystemConfig, HttpSystemConfig, PythonSystemConfig, SystemConfig
from tuner.cost import BudgetSpent, CostMeter
from tuner.systems import AskedSystem, BadReply, Rejected, make_system

TESTS = Path(__file__).resolve().parent
KNOBS = {"behave": {"type": "str", "default": "ok"}, "delay": {"type": "float", "default": 0.0},
         "k": {"type": "int", "default": 3}}


@contextlib.contextmanager
def python_kind(**settings) -> Iterator[SystemConfig]:
    yield PythonSystemConfig(python="contract_system:answer", path=TESTS, version="1", knobs=KNOBS, **settings)


@contextlib.contextmanager
def served(app) -> Iterator[str]:
    """An ASGI app served on a local port: its address."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def http_kind(**settings) -> Iterator[SystemConfig]:
    """The same function behind HTTP, served by tuner's own FastAPI adapter on a local port."""
    from tests import contract_system
    from tuner.systems.adapters import http_app

    with served(http_app(contract_system.answer)) as url:
        yield HttpSystemConfig(http=f"{url}/", version="1", knobs=KNOBS, **settings)


@contextlib.contextmanager
def http_as_it_is_kind(**settings) -> Iterator[SystemConfig]:
    """The same function behind a service of its own shape, described by a request template and response paths:
    POST /ask {"query", "qid", "options": {knobs}} answering {"data": {"reply", "docs": [{"body", "ref"}],
    "tokens"}}."""
    from fastapi import FastAPI, HTTPException
    from fastapi.concurrency import run_in_threadpool

    from tests import contract_system

    app = FastAPI()

    @app.post("/ask")
    async def ask(body: dict) -> dict:
        try:
            reply = await run_in_threadpool(contract_system.answer, {"id": body["qid"], "text": body["query"]},
                                            body["options"])
        except Rejected as exc:
            raise HTTPException(422, str(exc)) from None
        except Exception as exc:
            raise HTTPException(500, f"{type(exc).__name__}: {exc}") from None
        docs = [{"body": c["text"], "ref": c["id"]} if isinstance(c, dict) else {"body": c, "ref": None}
                for c in reply["contexts"]]
        return {"data": {**({"reply": reply["answer"]} if "answer" in reply else {}), "docs": docs,
                         "tokens": reply["usage"]}}

    with served(app) as url:
        yield HttpSystemConfig(
            http=f"{url}/ask", version="1", knobs=KNOBS, **settings,
            request={"query": "{question}", "qid": "{question_id}",
                     "options": {"behave": "{behave}", "delay": "{delay}", "k": "{k}"}},
            response={"answer": "data.reply", "contexts": "data.docs", "text": "body", "id": "ref",
                      "usage": "data.tokens"})


@contextlib.contextmanager
def command_kind(**settings) -> Iterator[SystemConfig]:
    """The same function as a program: tests/contract_command.py, run per question."""
    yield CommandSystemConfig(command=[sys.executable, "contract_command.py"], path=TESTS, version="1", knobs=KNOBS,
                              **settings)


#: every kind of system, as a way to serve the scripted system as that kind
KINDS: dict[str, Callable[..., contextlib.AbstractContextManager[SystemConfig]]] = {
    "python": python_kind, "http": http_kind, "http-as-it-is": http_as_it_is_kind, "command": command_kind}


@pytest.fixture(params=sorted(KINDS))
def kind(request, tmp_path, monkeypatch):
    """`kind(**settings)`: an AskedSystem of this kind over a fresh cache and meter, closed after the test."""
    monkeypatch.setenv("CONTRACT_CALLS", str(tmp_path / "calls.jsonl"))
    with contextlib.ExitStack() as stack:
        def make(**settings) -> AskedSystem:
            config = stack.enter_context(KINDS[request.param](**settings))
            store = SqliteStore(tmp_path / "cache.sqlite")
            asked = AskedSystem(config, make_system(config), store, CostMeter())
            stack.callback(asked.close)
            return asked

        make.name = request.param
        yield make


def calls(tmp_path: Path) -> list[list]:
    log = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_reply_is_parsed_and_counted(kind):
    system = kind()
    reply = system.reply("q1", "who?", {"k": 3})
    assert reply.answer == "the answer to who?"
    assert [(c.text, c.id) for c in reply.contexts] == [("a passage about who?", "doc-q1"), ("bare", None)]
    cost = system.meter.total()
    assert (cost.llm_calls, cost.prompt_tokens, cost.completion_tokens, cost.cache_hits) == (1, 120, 8, 0)


#: a bad reply as each kind says it: a service described by response paths names the path that let it down
BAD_REPLIES = {
    "no answer": {"": "the reply lacks 'answer' (it has 'contexts', 'usage'); a system that retrieves only is "
                      "configured with answers: false",
                  "http-as-it-is": "the reply has no 'data.reply' (system.response.answer; at 'reply' it has 'docs', "
                                   "'tokens')"},
    "number context": {"": "context 1 of the reply is int, not text (a context is text, or an object with text and "
                           "id)",
                       "http-as-it-is": "context 1's 'body' is int, not text (system.response.text)"},
}


@pytest.mark.parametrize("behave", BAD_REPLIES)
def test_a_bad_reply_fails_that_question_in_one_line(kind, behave):
    system = kind()
    with pytest.raises(BadReply) as raised:
        system.reply("q1", "who?", {"behave": behave})
    said = BAD_REPLIES[behave]
    assert str(raised.value) == said.get(kind.name, said[""])
    assert system.meter.total().llm_calls == 1  # asked and paid for, nothing kept


def test_an_error_inside_the_system_fails_that_question_naming_it(kind):
    with pytest.raises(BadReply, match=r"KeyError: 'embedding'"):
        kind().reply("q1", "who?", {"behave": "raise"})


def test_refused_knobs_are_a_refusal_not_a_bad_reply(kind):
    with pytest.raises(Rejected, match="k=9 is more than this index holds"):
        kind().reply("q1", "who?", {"behave": "refuse", "k": 9})


def test_a_reply_slower_than_the_timeout_fails_that_question(kind):
    with pytest.raises(BadReply, match=r"the system did not reply within 0.3 s"):
        kind(timeout=0.3).reply("q1", "who?", {"delay": 1.0})


def test_a_reply_is_asked_once_per_question_and_knobs(kind, tmp_path):
    system = kind()
    first = system.reply("q1", "who?", {"k": 3})
    assert system.reply("q1", "who?", {"k": 3}) == first  # from the cache
    system.reply("q1", "who?", {"k": 4})  # other knobs: asked
    assert [c[1]["k"] for c in calls(tmp_path)] == [3, 4]
    assert system.meter.total().cache_hits == 1


def test_questions_asked_at_once_each_get_their_own_reply(kind, tmp_path):
    system = kind(concurrency=4)
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda n: system.reply(f"q{n}", f"question {n}", {"delay": 0.2}), range(8)))
    assert [r.answer for r in replies] == [f"the answer to question {n}" for n in range(8)]
    assert sorted(c[0] for c in calls(tmp_path)) == sorted(f"q{n}" for n in range(8))


def test_after_a_stop_no_question_is_asked_and_replies_in_flight_are_kept(kind, tmp_path):
    system = kind(concurrency=2)
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(system.reply, "q1", "who?", {"delay": 0.5})
        while not calls(tmp_path):
            time.sleep(0.02)
        system.meter.stopping = True  # Ctrl-C: questions in flight finish, none begins
        with pytest.raises(BudgetSpent):
            system.reply("q2", "what?", {})
        kept = in_flight.result()
    system.meter.stopping = False
    assert system.reply("q1", "who?", {"delay": 0.5}) == kept  # from the cache: the resume pays nothing
    assert [c[0] for c in calls(tmp_path)] == ["q1"]
