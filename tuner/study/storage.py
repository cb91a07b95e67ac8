"""Where a study lives: studies/<name>/ holds the Optuna journal (and, with --own-cache or from before caches were
shared, the LLM + embedding caches), one JSON per trial (on the search questions) and one per trial the verdict scored on the held-out questions (holdout/), so
reports read results instead of re-running anything.

One machine uses Optuna's journal file (append-only: a kill -9 loses no completed trial; optuna-dashboard
reads it as is). `--storage URL` takes an RDB URL (PostgreSQL for several workers, SQLite) with heartbeats so
crashed workers' trials are retried by Optuna itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from tuner.errors import ConfigError, DataError
from tuner.evaluation.records import TrialFile
from tuner.ui import err_console

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: the study attribute holding a copy of study.json, so losing the file loses nothing
META_ATTR = "tuner"


@dataclass(frozen=True)
class StudyFolder:
    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def journal(self) -> Path:
        return self.root / "journal.log"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def trials(self) -> Path:
        return self.root / "trials"

    @property
    def meta(self) -> Path:
        return self.root / "study.json"

    @property
    def holdout(self) -> Path:
        return self.root / "holdout"

    def cache_in_use(self, meta: dict[str, Any]) -> Path:
        """Where the study's LLM calls and embeddings are cached: its own cache/ (--own-cache, or made before caches
        were shared), else the project cache it recorded."""
        return self.cache.resolve() if meta.get("cache", "own") == "own" else Path(meta["project"]["cache_dir"])

    def trial_file(self, number: int, held_out: bool = False) -> Path:
        return (self.holdout if held_out else self.trials) / f"{number:04d}.json"

    def write_trial(self, record: TrialFile, held_out: bool = False) -> None:
        path = self.trial_file(record.number, held_out)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(record.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
        partial.replace(path)  # atomic: a reader never sees half a file

    def read_trial(self, number: int, held_out: bool = False) -> TrialFile | None:
        """The trial's file (or its held-out evaluation's), or None when it has none (a trial that failed before
        finishing its first question; a trial the verdict did not score)."""
        path = self.trial_file(number, held_out)
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: unreadable trial file ({exc})") from None
        return TrialFile.from_json(data, source=str(path))

    def read_meta(self) -> dict[str, Any]:
        """study.json; when it is gone but the journal holds the study, rebuilt from the journal's copy."""
        if not self.meta.is_file():
            return self._restore_meta()
        try:
            data = json.loads(self.meta.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise DataError(f"{self.meta}: unreadable ({exc})") from None
        if not isinstance(data, dict):
            raise DataError(f"{self.meta}: unreadable (not a JSON object)")
        return data

    def _restore_meta(self) -> dict[str, Any]:
        if not self.journal.is_file() or not self.journal.stat().st_size:
            return {}
        from tuner.study.optimize import stored_meta

        data = stored_meta(make_storage(self, None), self.name)
        if data:
            self.write_meta(data)
            err_console.print(f"{self.meta} was missing: rebuilt from the copy in {self.journal.name}",
                              highlight=False, soft_wrap=True)
        return data

    def write_meta(self, data: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.meta.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def study_folder(studies_dir: Path, name: str) -> StudyFolder:
    if not NAME.match(name):
        raise ConfigError(f"study name {name!r}: use letters, digits, '.', '_' or '-' (up to 100)")
    return StudyFolder(Path(studies_dir) / name)


def make_storage(folder: StudyFolder, url: str | None) -> optuna.storages.BaseStorage:
    if url is None:
        from optuna.storages.journal import JournalFileBackend

        folder.root.mkdir(parents=True, exist_ok=True)
        note = repair_journal(folder.journal)
        if note:
            err_console.print(note, highlight=False, soft_wrap=True)
        try:
            return optuna.storages.JournalStorage(JournalFileBackend(str(folder.journal)))
        except (ValueError, KeyError, IndexError) as exc:  # entries Optuna cannot replay: report, never rewrite
            raise DataError(f"{folder.journal}: Optuna cannot replay this journal ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})") from None
    import warnings

    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    try:
        with warnings.catch_warnings():  # heartbeats are marked experimental, yet they are what multi-worker needs
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(url, heartbeat_interval=60, grace_period=180,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3))
    except Exception as exc:  # sqlalchemy raises many kinds for a bad URL or an unreachable server
        raise ConfigError(f"--storage {redact(url)}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None


#: how every Optuna journal entry starts: where a whole entry appended after a torn one begins
ENTRY_START = b'{"op_code":'


def repair_journal(path: Path) -> str | None:
    """Set aside what a kill -9 or a power cut in the middle of an append leaves in the journal — a last line with
    no newline, or (from resumes before this check) such a fragment glued to the front of the next entry — so
    Optuna reads every whole entry and appends after them. The fragments go to `journal.log.torn`; returns a line
    saying so, or None when the journal is sound. Runs under Optuna's own journal lock: a fragment is only ever
    judged torn while no writer can be halfway through it."""
    if not path.is_file() or _sound(path.read_bytes()):
        return None
    from optuna.storages.journal import JournalFileSymlinkLock

    lock = JournalFileSymlinkLock(str(path))
    lock.acquire()
    try:
        kept, torn = _split_torn(path.read_bytes())
        if not torn:
            return None
        with open(path.with_name(path.name + ".torn"), "ab") as aside:
            aside.write(b"".join(t + b"\n" for t in torn))
        repaired = path.with_name(path.name + ".repair")
        repaired.write_bytes(b"".join(line + b"\n" for line in kept))
        repaired.replace(path)  # atomic: the journal is either the old one or the repaired one
    finally:
        lock.release()
    return (f"{path}: set aside {sum(map(len, torn))} bytes of a half-written journal entry (left by a kill or a "
            f"power cut mid-write) in {path.name}.torn; every complete entry is kept")


def _entry(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        return False


def _sound(data: bytes) -> bool:
    return not data or (data.endswith(b"\n") and all(_entry(line) for line in data.splitlines() if line))


def _split_torn(data: bytes) -> tuple[list[bytes], list[bytes]]:
    """The whole entries of a journal, and the fragments around them."""
    *lines, tail = data.split(b"\n")
    kept, torn = [], [tail] if tail else []
    for line in filter(None, lines):
        if _entry(line):
            kept.append(line)
            continue
        start = line.rfind(ENTRY_START)
        if start > 0 and _entry(line[start:]):
            kept.append(line[start:])
            torn.append(line[:start])
        else:
            torn.append(line)
    return kept, torn


def redact(url: str) -> str:
    """A storage URL without its password, for messages and study.json."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)
