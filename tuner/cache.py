"""Durable key -> JSON stores behind one small contract, `KeyValue`, with two homes:

- `SqliteStore`: a file on this machine (the default cache folder, a study's own cache);
- `DatabaseStore`: a table in a study's RDB storage (PostgreSQL), so workers on several machines share what
  any of them paid for.

Every LLM call (generation, judging, LLM reranking) and every embedded text is recorded the moment it returns, so
an interrupted run, a re-run or another trial (or worker) asking the same thing pays nothing for it. Each write
is atomic: a kill -9 loses at most the call in flight. Studies kept in a database store their settings and trial
records the same way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tuner.cost import CostMeter
from tuner.errors import ConfigError, DataError, described

log = logging.getLogger(__name__)

#: keys per query: SQLite binds at most 999 parameters
BATCH = 500
#: how long a lease outlives its last renewal (renewed every third of it): a dead worker's call is free again then
LEASE_SECONDS = 30.0
#: how often a process waiting for another's lease looks for the value
POLL_SECONDS = 0.25
#: how long opening a SQLite store waits while other processes hold it locked
OPEN_SECONDS = 30.0


def stable_hash(value: Any) -> str:
    """sha256 of the canonical JSON of `value`: the key of anything we cache."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def redact(url: str) -> str:
    """A storage URL without its password, for messages and study.json."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def while_others_create_tables(create, attempts: int = 5):
    """`create()`, tried again while it fails because workers starting at once on an empty database are creating
    the same tables (PostgreSQL says "already exists" or "duplicate key", and only one of them wins)."""
    for attempt in range(attempts):
        try:
            return create()
        except Exception as exc:
            if attempt == attempts - 1 or not any(s in str(exc) for s in ("already exists", "duplicate key")):
                raise
            time.sleep(0.2 * (attempt + 1))


def is_database(location: Path | str) -> bool:
    """A database URL (a study's --storage), not a folder."""
    return isinstance(location, str) and "://" in location


def open_store(location: Path | str, name: str) -> KeyValue:
    """The store `name` ("llm_calls", "embeddings", "records") in a cache folder or in the database at a URL."""
    if is_database(location):
        return DatabaseStore(location, f"tuner_{name}")
    return SqliteStore(Path(location) / f"{name}.sqlite")


class KeyValue(ABC):
    """Keys to JSON values. Each entry has a tag (the model that produced it) and the day it was last used, which
    `tuner cache prune` selects by, and counts its writes: more than one means something was paid for twice.

    Guarantees: `put_many` is one transaction (every entry or none); once it returns, `get` in any process using
    the same file or database sees the entries; the last write of a key wins; nothing is ordered across keys. A
    lease (`claim`) is held by one owner at a time until it expires or is released, so of two processes about to
    pay for one key, one pays and the other reads what it wrote (`lease`)."""

    def get(self, key: str) -> Any | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, value: Any, tag: str | None = None) -> None:
        self.put_many({key: value}, tag)

    @abstractmethod
    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """The values of the keys present (reading marks them used today)."""

    @abstractmethod
    def put_many(self, items: Mapping[str, Any], tag: str | None = None) -> None:
        """Write all in one transaction."""

    @abstractmethod
    def summary(self) -> list[Group]:
        """Entries per tag: how many, their bytes, the day one was last used."""

    @abstractmethod
    def prune(self, unused_days: int | None = None, tag: str | None = None) -> int:
        """Delete the entries unused for `unused_days` days and/or whose tag contains `tag`; returns how many.
        Untagged entries (written before tags) match no tag; no selector deletes nothing."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def repeated(self) -> int:
        """Keys written more than once (the same call paid for again)."""

    @abstractmethod
    def claim(self, key: str, owner: str, seconds: float, dead: str = "") -> bool:
        """Take (or renew) the lease on `key` for `seconds` unless another owner holds one that has not expired
        (or `dead`, an owner known to be gone, holds it); True when `owner` holds it now."""

    @abstractmethod
    def holder(self, key: str) -> str | None:
        """The owner of the lease on `key`, expired or not; None when nobody holds one."""

    @abstractmethod
    def release(self, key: str, owner: str) -> None:
        """Give up `owner`'s lease on `key`."""

    @contextmanager
    def lease(self, key: str) -> Iterator[Any | None]:
        """Around paying for `key`: yields its value when another process (a worker on another machine, a study
        beside this one) wrote it while this one waited for their lease, else None while this process holds the
        lease — renewed in the background, so a worker that dies frees it within LEASE_SECONDS."""
        owner = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        dead, told = "", False
        while not self.claim(key, owner, LEASE_SECONDS, dead):
            holder = self.holder(key) or ""
            if holder != dead and gone(holder):  # a stopped tuner's call on this machine: nobody is asking it
                dead = holder
                continue
            if not told:  # once per call: waits of up to LEASE_SECONDS would otherwise pass in silence
                told = True
                log.warning(f"waiting for process {holder.rsplit(':', 1)[0] or '?'}, which is asking the same call "
                            f"(its reply is then read from the cache; a process that died frees it within "
                            f"{LEASE_SECONDS:g} s)")
            time.sleep(POLL_SECONDS)
            if (value := self.get(key)) is not None:
                yield value
                return
        done = threading.Event()

        def renew() -> None:
            while not done.wait(LEASE_SECONDS / 3):
                self.claim(key, owner, LEASE_SECONDS)

        renewer = threading.Thread(target=renew, daemon=True)
        renewer.start()
        try:
            yield self.get(key)  # written between our miss and the lease
        finally:
            done.set()
            renewer.join()
            self.release(key, owner)


def gone(owner: str) -> bool:
    """Whether a lease's owner (host:pid:thread) was a process of this machine that no longer runs."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def _batches(keys: Iterable[str]) -> Iterable[list[str]]:
    keys = list(dict.fromkeys(keys))
    for start in range(0, len(keys), BATCH):
        yield keys[start:start + BATCH]


class SqliteStore(KeyValue):
    """A SQLite file. A damaged file (a disk fault, a copy taken mid-write) is moved aside and rebuilt from the
    entries still readable, once, with a line saying so: the run goes on and pays again only for what was lost."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        deadline = time.monotonic() + OPEN_SECONDS
        while True:
            try:
                self._db = self._open()
                if self._db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                    raise sqlite3.DatabaseError("quick_check found damage")
                return
            except sqlite3.OperationalError as exc:  # locked, read-only, no space: not damage, nothing to rebuild
                if self._db is not None:
                    self._db.close()
                    self._db = None
                # Switching a new file to WAL answers "locked" at once, without waiting, while another process
                # opening the same file does the same: wait for it rather than fail.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise DataError(f"{self.path}: cannot open the cache ({exc})") from None
                time.sleep(POLL_SECONDS)
            except sqlite3.DatabaseError as exc:
                self._rebuild(exc)
                return

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        # `writes` > 1 means a call was paid for twice: the resume guarantee is that this never happens.
        # `tag` (the model) and `used` (day last read or written) are what `tuner cache prune` selects by.
        db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                   "writes INTEGER NOT NULL DEFAULT 1, tag TEXT, used INTEGER NOT NULL DEFAULT 0)")
        columns = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
        for column, kind in (("tag", "TEXT"), ("used", "INTEGER NOT NULL DEFAULT 0")):
            if column not in columns:  # a cache written before these columns: entries keep working untagged
                db.execute(f"ALTER TABLE entries ADD COLUMN {column} {kind}")
        db.execute("CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, owner TEXT NOT NULL, until REAL NOT NULL)")
        db.commit()
        return db

    def _rebuild(self, exc: sqlite3.DatabaseError) -> None:
        if self._db is not None:
            self._db.close()
        aside = self.path.with_name(self.path.name + ".corrupt")
        for suffix in ("", "-wal", "-shm"):  # the write-ahead log belongs to the damaged file
            part = Path(f"{self.path}{suffix}")
            if part.exists():
                part.replace(Path(f"{aside}{suffix}"))
        rows = _readable_rows(aside)
        self._db = self._open()
        self._db.executemany("INSERT OR IGNORE INTO entries (key, value, writes) VALUES (?, ?, ?)", rows)
        self._db.commit()
        log.warning(f"{self.path}: the cache was damaged ({exc}); moved aside to {aside.name} and rebuilt with the "
                    f"{len(rows)} entries still readable: calls it lost will be paid again")


    def _run(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self._committed(lambda: self._db.execute(sql, args).fetchall())

    def _committed(self, work):
        """`work()` then a commit, under the lock; damage found mid-run is rebuilt once and the work done again."""
        with self._lock:
            try:
                result = work()
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:
                self._rebuild(exc)
                result = work()
            self._db.commit()
            return result

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        found = {}
        for batch in _batches(keys):
            marks = ",".join("?" * len(batch))
            rows = self._run(f"SELECT key, value, used FROM entries WHERE key IN ({marks})", tuple(batch))
            stale = [key for key, _, used in rows if used < today()]
            if stale:  # at most one write per entry and day
                self._run(f"UPDATE entries SET used = ? WHERE key IN ({','.join('?' * len(stale))})",
                          (today(), *stale))
            found.update((key, json.loads(value)) for key, value, _ in rows)
        return found

    def put_many(self, items: Mapping[str, Any], tag: str | None = None) -> None:
        rows = [(key, json.dumps(value), tag, today()) for key, value in items.items()]
        self._committed(lambda: self._db.executemany(UPSERT, rows))

    def summary(self) -> list[Group]:
        rows = self._run("SELECT tag, COUNT(*), SUM(LENGTH(key) + LENGTH(value)), MAX(used) FROM entries "
                         "GROUP BY tag ORDER BY tag")
        return [Group(tag, count, size or 0, used) for tag, count, size, used in rows]

    def prune(self, unused_days: int | None = None, tag: str | None = None) -> int:
        where, args = [], []
        if unused_days is not None:
            where.append("used < ?")
            args.append(today() - unused_days)
        if tag is not None:
            where.append("instr(tag, ?) > 0")
            args.append(tag)
        if not where:
            return 0
        count = self._run(f"SELECT COUNT(*) FROM entries WHERE {' AND '.join(where)}", tuple(args))[0][0]
        self._run(f"DELETE FROM entries WHERE {' AND '.join(where)}", tuple(args))
        with self._lock:
            self._db.execute("VACUUM")  # give the space back to the disk
        return count

    def __len__(self) -> int:
        return self._run("SELECT COUNT(*) FROM entries")[0][0]

    def repeated(self) -> int:
        return self._run("SELECT COUNT(*) FROM entries WHERE writes > 1")[0][0]

    def claim(self, key: str, owner: str, seconds: float, dead: str = "") -> bool:
        now = time.time()
        return self._committed(lambda: self._db.execute(CLAIM, (key, owner, now + seconds, now, dead)).rowcount) == 1

    def holder(self, key: str) -> str | None:
        rows = self._run("SELECT owner FROM leases WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def release(self, key: str, owner: str) -> None:
        self._run("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))


CLAIM = ("INSERT INTO leases (key, owner, until) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
         "owner = excluded.owner, until = excluded.until WHERE leases.owner = excluded.owner OR leases.until < ? "
         "OR leases.owner = ?")
UPSERT = ("INSERT INTO entries (key, value, tag, used) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
          "value = excluded.value, writes = entries.writes + 1, used = excluded.used")


class DatabaseStore(KeyValue):
    """A table in an RDB (PostgreSQL; any SQLAlchemy URL works) that several workers read and write at once. An
    upsert counts writes exactly as the SQLite store does, so a call two workers both paid for shows up."""

    def __init__(self, url: str, table: str):
        import sqlalchemy as sa

        self._sa = sa
        self.where = f"{redact(url)} table {table}"
        self.table = sa.Table(table, sa.MetaData(), sa.Column("key", sa.Text, primary_key=True),
                              sa.Column("value", sa.Text, nullable=False),
                              sa.Column("writes", sa.Integer, nullable=False, server_default="1"),
                              sa.Column("tag", sa.Text), sa.Column("used", sa.Integer, nullable=False,
                                                                   server_default="0"))
        self.leases = sa.Table(f"{table}_leases", self.table.metadata, sa.Column("key", sa.Text, primary_key=True),
                               sa.Column("owner", sa.Text, nullable=False),
                               sa.Column("until", sa.Float, nullable=False))
        try:
            self.engine = sa.create_engine(url, pool_pre_ping=True)
            for created in (self.table, self.leases):
                while_others_create_tables(lambda: created.create(self.engine, checkfirst=True))
                # a table of that name from another application: the first read would fail on a missing column
                found = {c["name"] for c in sa.inspect(self.engine).get_columns(created.name)}
                if not set(created.c.keys()) <= found:
                    raise ConfigError(f"{redact(url)}: its table {created.name} is another application's (columns "
                                      f"{', '.join(sorted(found))}, not tuner's {', '.join(created.c.keys())}): "
                                      f"give tuner a database of its own")
        except (sa.exc.SQLAlchemyError, ImportError) as exc:  # a bad URL, no driver, an unreachable server
            raise ConfigError(f"{self.where}: {described(exc)}") from None
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif self.engine.dialect.name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            raise ConfigError(f"{self.where}: tuner keeps caches in PostgreSQL or SQLite, not "
                              f"{self.engine.dialect.name}")
        self._insert = insert

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        t, found = self.table, {}
        with self.engine.begin() as db:
            for batch in _batches(keys):
                rows = db.execute(self._sa.select(t.c.key, t.c.value, t.c.used).where(t.c.key.in_(batch))).all()
                stale = [key for key, _, used in rows if used < today()]
                if stale:
                    db.execute(t.update().where(t.c.key.in_(stale)).values(used=today()))
                found.update((key, json.loads(value)) for key, value, _ in rows)
        return found

    def put_many(self, items: Mapping[str, Any], tag: str | None = None) -> None:
        if not items:
            return
        rows = [{"key": k, "value": json.dumps(v), "tag": tag, "used": today()} for k, v in items.items()]
        statement = self._insert(self.table)
        statement = statement.on_conflict_do_update(index_elements=["key"], set_={
            "value": statement.excluded.value, "used": statement.excluded.used, "writes": self.table.c.writes + 1})
        with self.engine.begin() as db:
            db.execute(statement, rows)

    def _selected(self, unused_days: int | None, tag: str | None):
        conditions = []
        if unused_days is not None:
            conditions.append(self.table.c.used < today() - unused_days)
        if tag is not None:
            conditions.append(self.table.c.tag.contains(tag, autoescape=True))
        return conditions

    def summary(self) -> list[Group]:
        sa, t = self._sa, self.table
        query = sa.select(t.c.tag, sa.func.count(), sa.func.sum(sa.func.length(t.c.key) + sa.func.length(t.c.value)),
                          sa.func.max(t.c.used)).group_by(t.c.tag).order_by(t.c.tag)
        with self.engine.begin() as db:
            return [Group(tag, count, int(size or 0), used) for tag, count, size, used in db.execute(query)]

    def prune(self, unused_days: int | None = None, tag: str | None = None) -> int:
        conditions = self._selected(unused_days, tag)
        if not conditions:
            return 0
        with self.engine.begin() as db:
            return db.execute(self.table.delete().where(*conditions)).rowcount

    def _count(self, *conditions) -> int:
        with self.engine.begin() as db:
            counted = self._sa.select(self._sa.func.count()).select_from(self.table).where(*conditions)
            return db.execute(counted).scalar()

    def __len__(self) -> int:
        return self._count()

    def repeated(self) -> int:
        return self._count(self.table.c.writes > 1)

    def claim(self, key: str, owner: str, seconds: float, dead: str = "") -> bool:
        now, leases = time.time(), self.leases
        statement = self._insert(leases).values(key=key, owner=owner, until=now + seconds)
        statement = statement.on_conflict_do_update(
            index_elements=["key"], set_={"owner": statement.excluded.owner, "until": statement.excluded.until},
            where=(leases.c.owner == statement.excluded.owner) | (leases.c.until < now) | (leases.c.owner == dead)
        ).returning(leases.c.key)
        with self.engine.begin() as db:
            return db.execute(statement).first() is not None

    def holder(self, key: str) -> str | None:
        with self.engine.begin() as db:
            return db.execute(self._sa.select(self.leases.c.owner).where(self.leases.c.key == key)).scalar()

    def release(self, key: str, owner: str) -> None:
        with self.engine.begin() as db:
            db.execute(self.leases.delete().where(self.leases.c.key == key, self.leases.c.owner == owner))


@dataclass(frozen=True)
class Group:
    tag: str | None
    entries: int
    bytes: int
    last_used: int  # days since 1970-01-01 (0: before use was recorded)


def today() -> int:
    """Days since 1970-01-01 (UTC): the grain of `used`."""
    return int(time.time() // 86400)


def _readable_rows(path: Path) -> list[tuple[str, str, int]]:
    """The entries a damaged cache file still gives up: all at once if it can, else row by row."""
    try:
        db = sqlite3.connect(path)
    except sqlite3.DatabaseError:
        return []
    try:
        try:
            return db.execute("SELECT key, value, writes FROM entries").fetchall()
        except sqlite3.DatabaseError:
            pass
        try:
            last = db.execute("SELECT MAX(rowid) FROM entries").fetchone()[0] or 0
        except sqlite3.DatabaseError:
            return []
        rows = []
        for rowid in range(1, last + 1):
            try:
                rows += db.execute("SELECT key, value, writes FROM entries WHERE rowid = ?", (rowid,)).fetchall()
            except sqlite3.DatabaseError:
                continue
        return rows
    finally:
        db.close()


class Paid(Protocol):
    """What a paid call returns and the meter counts."""

    prompt_tokens: int
    completion_tokens: int


P = TypeVar("P", bound=Paid)


def paid_once(cache: KeyValue | None, meter: CostMeter, key: Any, tag: str, pay: Callable[[], P],
              stored: Callable[[P], dict[str, Any]], loaded: Callable[[dict[str, Any]], P],
              paid_if: tuple[type[Exception], ...] = ()) -> P:
    """`pay()` read through the cache, counted by `meter`: a hit costs nothing and keeps the seconds the call took
    when it was paid (a configuration served from the cache still costs what it took), a miss is paid once even
    when other workers ask for it at the same moment (they wait on its lease). `stored`/`loaded`: the value as
    the cache keeps it; `paid_if`: errors raised after the call was paid for (counted, nothing kept). No cache:
    every call is paid (benchmarks' naive mode)."""
    if cache is None:
        return _pay(meter, pay, paid_if)[0]
    digest = stable_hash(key)
    if (hit := cache.get(digest)) is not None:
        return _hit(meter, hit, loaded)
    with cache.lease(digest) as hit:  # another worker may be paying for this very call: wait for it
        if hit is not None:
            return _hit(meter, hit, loaded)
        value, seconds = _pay(meter, pay, paid_if)
        cache.put(digest, {**stored(value), "seconds": round(seconds, 4)}, tag=tag)
        return value


def _hit(meter: CostMeter, hit: dict[str, Any], loaded: Callable[[dict[str, Any]], P]) -> P:
    value = loaded(hit)
    meter.record_call(value.prompt_tokens, value.completion_tokens, cache_hit=True, seconds=hit.get("seconds"))
    return value


def _pay(meter: CostMeter, pay: Callable[[], P], paid_if: tuple[type[Exception], ...]) -> tuple[P, float]:
    meter.before_paid_call()  # after a stop (or with the budget spent), nothing new is paid for
    started = time.perf_counter()
    try:
        value = pay()
    except paid_if:
        meter.record_call(0, 0, cache_hit=False, seconds=time.perf_counter() - started)
        raise
    seconds = time.perf_counter() - started
    meter.record_call(value.prompt_tokens, value.completion_tokens, cache_hit=False, seconds=seconds,
                      evaluated_tokens=getattr(value, "evaluated_tokens", None))
    return value, seconds
