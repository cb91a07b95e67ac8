"""The key-value contract every cache and record store keeps: the SQLite file and the database table (PostgreSQL
when a test server is up, and SQLite through SQLAlchemy) behave the same."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from tuner.cache import DatabaseStore, KeyValue, SqliteStore, open_store, today
from tuner.errors import ConfigError


@pytest.fixture(params=["sqlite-file", "sqlite-url", "postgresql"])
def store(request, tmp_path) -> KeyValue:
    if request.param == "sqlite-file":
        return SqliteStore(tmp_path / "store.sqlite")
    if request.param == "sqlite-url":
        return DatabaseStore(f"sqlite:///{tmp_path / 'store.db'}", "tuner_test")
    return DatabaseStore(request.getfixturevalue("postgres_url"), "tuner_test")


def test_values_round_trip_and_writes_are_counted(store):
    assert store.get("missing") is None and len(store) == 0
    store.put("a", {"text": "x", "n": [1, 2.5, None]}, tag="m1")
    store.put_many({"b": "y", "c": ["z"]}, tag="m2")
    assert store.get("a") == {"text": "x", "n": [1, 2.5, None]}
    assert store.get_many(["a", "b", "c", "d"]) == {"a": {"text": "x", "n": [1, 2.5, None]}, "b": "y", "c": ["z"]}
    assert len(store) == 3 and store.repeated() == 0
    store.put("a", {"text": "again"}, tag="m1")  # the same key paid for twice: counted, last value kept
    assert store.get("a") == {"text": "again"} and store.repeated() == 1 and len(store) == 3


def test_many_keys_at_once(store):
    store.put_many({f"k{i}": i for i in range(1234)}, tag="bulk")  # more than one query's worth of parameters
    found = store.get_many([f"k{i}" for i in range(0, 1300, 3)])
    assert found == {f"k{i}": i for i in range(0, 1234, 3)}


def test_summary_and_prune_by_tag_and_age(store):
    store.put("a", 1, tag="gguf:qwen-0.5b:1")
    store.put_many({"b": 2, "c": 3}, tag="gguf:qwen-1.5b:2")
    store.put("old", 4)
    groups = {g.tag: (g.entries, g.last_used) for g in store.summary()}
    assert groups == {None: (1, today()), "gguf:qwen-0.5b:1": (1, today()), "gguf:qwen-1.5b:2": (2, today())}
    assert all(g.bytes > 0 for g in store.summary())
    assert store.prune() == 0  # no selector: nothing dropped
    assert store.prune(tag="1.5b") == 2 and store.get("b") is None and len(store) == 2
    assert store.prune(tag="%") == 0  # a tag is matched literally, never as a pattern
    assert store.prune(unused_days=0) == 0  # everything was used today
    assert store.prune(unused_days=-1) == 2 and len(store) == 0


def _write_many(location: str, offset: int) -> None:
    store = open_store(location, "shared")
    for i in range(50):
        store.put(f"k{(i + offset) % 60}", i, tag="w")


@pytest.fixture(params=["folder", "postgresql"])
def shared(request, tmp_path) -> str:
    """Where processes meet: a cache folder (SQLite) or a PostgreSQL database."""
    return tmp_path if request.param == "folder" else request.getfixturevalue("postgres_url")


def in_processes(target, *argument_lists) -> None:
    """Run `target` in one spawned process per argument list, all at once; each must succeed."""
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=target, args=args) for args in argument_lists]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0] * len(workers)


def test_writers_in_several_processes_lose_nothing(shared):
    """Two processes writing overlapping keys at once: every key lands, every double write is counted."""
    in_processes(_write_many, (shared, 0), (shared, 30))
    store = open_store(shared, "shared")
    assert len(store) == 60 and store.repeated() == 40  # keys 30..49 and 0..19 were written by both


def _open_at_once(location, barrier) -> None:
    barrier.wait()
    open_store(location, "fresh").put("k", 1)


def test_processes_opening_a_new_sqlite_store_at_once_all_get_it(tmp_path):
    """Switching a new file to WAL answers "locked" without waiting while another process does the same (seen in
    CI as a worker failing to open its cache): opening waits instead. Racy by nature, so tried many times."""
    ctx = multiprocessing.get_context("fork")
    for attempt in range(8):
        barrier = ctx.Barrier(6)
        workers = [ctx.Process(target=_open_at_once, args=(tmp_path / str(attempt), barrier)) for _ in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [worker.exitcode for worker in workers] == [0] * 6


def test_a_lease_is_held_by_one_owner_until_released_or_expired(store):
    assert store.claim("k", "a", 30) and store.claim("k", "a", 30)  # taken, then renewed by its owner
    assert not store.claim("k", "b", 30)
    store.release("k", "b")  # not b's to give up
    assert not store.claim("k", "b", 30)
    store.release("k", "a")
    assert store.claim("k", "b", 0.01)
    time.sleep(0.05)
    assert store.claim("k", "a", 30)  # b's lease expired (its worker died): free again
    assert len(store) == 0  # leases are not entries


def _pay_once(location: str, key: str, log: str) -> None:
    store = open_store(location, "shared")
    with store.lease(key) as value:
        if value is None:
            with open(log, "a") as paid:
                paid.write("paid\n")
            time.sleep(1.0)  # a slow LLM call: the other process asks for the same key meanwhile
            store.put(key, "answer")


def test_two_processes_wanting_one_call_pay_for_it_once(shared, tmp_path):
    log = tmp_path / "paid.log"
    in_processes(_pay_once, (shared, "call", str(log)), (shared, "call", str(log)))
    store = open_store(shared, "shared")
    assert log.read_text() == "paid\n" and store.get("call") == "answer" and store.repeated() == 0


def test_an_unreachable_database_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"postgresql://tuner:\*\*\*@127.0.0.1:9/none.*OperationalError"):
        DatabaseStore("postgresql://tuner:s3cret@127.0.0.1:9/none", "tuner_test")
    with pytest.raises(ConfigError, match="no_such_driver|NoSuchModuleError"):
        DatabaseStore("no_such_driver://x/y", "tuner_test")
