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


def stable_hash(value: Any) -> str:
    """sha256 of the canonical JSON of `value`: the key of anything we cache."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class DiskCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        # `writes` > 1 means a call was paid for twice: the resume guarantee is that this never happens
        self._db.execute("CREATE TABLE IF NOT EXISTS entries "
                         "(key TEXT PRIMARY KEY, value TEXT NOT NULL, writes INTEGER NOT NULL DEFAULT 1)")
        self._db.commit()

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute("INSERT INTO entries (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                             "value = excluded.value, writes = writes + 1", (key, json.dumps(value)))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def repeated(self) -> int:
        """Keys written more than once (the same call paid for again)."""
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM entries WHERE writes > 1").fetchone()[0]
