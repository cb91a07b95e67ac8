"""A durable key -> JSON store on disk (SQLite, one row per key).

Every LLM call (generation, judging, LLM reranking) is recorded here the moment it returns, so an
interrupted run, a re-run or another trial asking the same thing pays nothing for it. SQLite's journal
makes each write atomic: a kill -9 loses at most the call in flight, never the file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import DataError


def stable_hash(value: Any) -> str:
    """sha256 of the canonical JSON of `value`: the key of anything we cache."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class DiskCache:
    """Keys to JSON values. A damaged file (a disk fault, a copy taken mid-write) is moved aside and rebuilt from
    the entries still readable, once, with a line saying so: the run goes on and pays again only for what was
    lost."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            self._db = self._open()
            if self._db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check found damage")
        except sqlite3.OperationalError as exc:  # locked, read-only, no space: not damage, nothing to rebuild
            raise DataError(f"{self.path}: cannot open the cache ({exc})") from None
        except sqlite3.DatabaseError as exc:
            self._rebuild(exc)

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        # `writes` > 1 means a call was paid for twice: the resume guarantee is that this never happens.
        # `tag` (the model) and `used` (day last read or written) are what `tuner cache prune` selects by.
        db.execute("CREATE TABLE IF NOT EXISTS entries "
                   "(key TEXT PRIMARY KEY, value TEXT NOT NULL, writes INTEGER NOT NULL DEFAULT 1)")
        columns = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
        for column, kind in (("tag", "TEXT"), ("used", "INTEGER NOT NULL DEFAULT 0")):
            if column not in columns:  # a cache written before these columns: entries keep working untagged
                db.execute(f"ALTER TABLE entries ADD COLUMN {column} {kind}")
        db.commit()
        return db

    def _rebuild(self, exc: sqlite3.DatabaseError) -> None:
        from tuner.ui import err_console

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
        err_console.print(f"{self.path}: the cache was damaged ({exc}); moved aside to {aside.name} and rebuilt "
                          f"with the {len(rows)} entries still readable: calls it lost will be paid again",
                          highlight=False, soft_wrap=True)


    def _run(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._commit(sql, args)
            except sqlite3.OperationalError:
                raise
            except sqlite3.DatabaseError as exc:  # damage found mid-run: rebuild once, then go on
                self._rebuild(exc)
                return self._commit(sql, args)

    def _commit(self, sql: str, args: tuple) -> list[tuple]:
        rows = self._db.execute(sql, args).fetchall()
        self._db.commit()
        return rows

    def get(self, key: str) -> Any | None:
        rows = self._run("SELECT value, used FROM entries WHERE key = ?", (key,))
        if not rows:
            return None
        if rows[0][1] < today():  # at most one write per entry and day
            self._run("UPDATE entries SET used = ? WHERE key = ?", (today(), key))
        return json.loads(rows[0][0])

    def put(self, key: str, value: Any, tag: str | None = None) -> None:
        self._run("INSERT INTO entries (key, value, tag, used) VALUES (?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                  "value = excluded.value, writes = writes + 1, used = excluded.used",
                  (key, json.dumps(value), tag, today()))

    def summary(self) -> list[Group]:
        """Entries per tag: how many, their bytes, the day one was last used."""
        rows = self._run("SELECT tag, COUNT(*), SUM(LENGTH(key) + LENGTH(value)), MAX(used) FROM entries "
                         "GROUP BY tag ORDER BY tag")
        return [Group(tag, count, size or 0, used) for tag, count, size, used in rows]

    def prune(self, unused_days: int | None = None, tag: str | None = None) -> int:
        """Delete the entries unused for `unused_days` days and/or whose tag contains `tag`; returns how many.
        Untagged entries (written before tags) match no tag."""
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
        """Keys written more than once (the same call paid for again)."""
        return self._run("SELECT COUNT(*) FROM entries WHERE writes > 1")[0][0]


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
