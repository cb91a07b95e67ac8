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
        # `writes` > 1 means a call was paid for twice: the resume guarantee is that this never happens
        db.execute("CREATE TABLE IF NOT EXISTS entries "
                   "(key TEXT PRIMARY KEY, value TEXT NOT NULL, writes INTEGER NOT NULL DEFAULT 1)")
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
        rows = self._run("SELECT value FROM entries WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def put(self, key: str, value: Any) -> None:
        self._run("INSERT INTO entries (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                  "value = excluded.value, writes = writes + 1", (key, json.dumps(value)))

    def __len__(self) -> int:
        return self._run("SELECT COUNT(*) FROM entries")[0][0]

    def repeated(self) -> int:
        """Keys written more than once (the same call paid for again)."""
        return self._run("SELECT COUNT(*) FROM entries WHERE writes > 1")[0][0]


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
