"""Where a study lives. On one machine, studies/<name>/ holds the Optuna journal (append-only: a kill -9 loses no
completed trial; optuna-dashboard reads it as is), study.json (its settings), one JSON per trial (on the search
questions) and one per trial the verdict scored on the held-out questions (holdout/), so reports read results
instead of re-running anything; with --own-cache (or from before caches were shared) also its caches.

`--storage URL` keeps all of it in an RDB instead (PostgreSQL for workers on several machines; SQLite): Optuna's
tables, plus tuner's `tuner_records` (settings, trial records) and the shared caches (`tuner_llm_calls`,
`tuner_embeddings`), so any worker given the URL runs, resumes and reports the study. Heartbeats let Optuna
fail and retry the trial of a worker that died.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import optuna

from tuner.cache import KeyValue, open_store, redact, while_others_create_tables
from tuner.errors import ConfigError, DataError, NewerRecord, described, first_line
from tuner.evaluation.labels import LABELS_FILE, Label, labels_of
from tuner.evaluation.labels import read as read_labels
from tuner.evaluation.records import TrialFile
from tuner.files import append_json_line, read_json_lines, write_json
from tuner.study.meta import StudyMeta

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: the study attribute holding a copy of study.json, so losing the file loses nothing
META_ATTR = "tuner"


class Documents(ABC):
    """Where a study keeps its JSON documents by name ("meta", "trials/0003", "judge_check.json"): files in its
    folder, or records in its database. One contract for both
    (`test_the_documents_contract_holds_in_a_folder_and_in_a_database` in tests/test_faults_storage.py runs it over
    each).

    Guarantees, as Optuna's `BaseStorage` states its own:
    * a document is whole or absent: `put` replaces it at once (a renamed sibling file, one transaction), so a
      reader, or a process killed mid-write, never sees half of one;
    * visibility: once `put` returns, every later `get` of that name sees it, in this process and in any other
      that reaches the same folder or database (workers of one study on other machines read the database);
    * no ordering across names: two documents written one after the other may be seen in either order by another
      process, so a reader must not infer one from the other (a trial's file is read for its trial number, and
      Optuna's record of the trial says whether it finished);
    * the last `put` of a name wins; there is no merge, so a document two processes write (none today) needs a
      lease (`KeyValue.lease`)."""

    @abstractmethod
    def get(self, name: str) -> Any | None:
        """The document, None when there is none; DataError (one line) when it cannot be read."""

    @abstractmethod
    def put(self, name: str, value: Any) -> None:
        """Write the document whole: a reader never sees half of it."""

    @abstractmethod
    def where(self, name: str) -> str:
        """The document, as an error names it."""

    @abstractmethod
    def append(self, name: str, item: Any) -> None:
        """Add `item` at the end of the log `name` ("labels.jsonl"), durably before this returns. A log has one
        writer at a time (a labelling session); readers see every item appended before they read."""

    @abstractmethod
    def items(self, name: str) -> list[tuple[int, Any]]:
        """The log's items in the order appended, each with its 1-based position ([] when there is none); a kill
        mid-append loses that item alone."""


@dataclass(frozen=True)
class FolderDocuments(Documents):
    root: Path

    def path(self, name: str) -> Path:
        if name == "meta":
            return self.root / "study.json"
        return self.root / (name if name.endswith((".json", ".jsonl")) else f"{name}.json")

    def get(self, name: str) -> Any | None:
        path = self.path(name)
        if not path.is_file():
            if path.exists():  # a folder (or worse) where the document belongs: not "no such document"
                raise DataError(f"{path}: is not a file; move it away and run again")
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: unreadable ({exc})") from None

    def put(self, name: str, value: Any) -> None:
        write_json(self.path(name), value, indent=2 if name == "meta" else 1)

    def where(self, name: str) -> str:
        return str(self.path(name))

    def append(self, name: str, item: Any) -> None:
        append_json_line(self.path(name), item)

    def items(self, name: str) -> list[tuple[int, Any]]:
        return read_json_lines(self.path(name))


@dataclass(frozen=True)
class DatabaseDocuments(Documents):
    store: KeyValue
    study: str

    def get(self, name: str) -> Any | None:
        return self.store.get(f"{self.study}/{name}")

    def put(self, name: str, value: Any) -> None:
        self.store.put(f"{self.study}/{name}", value)

    def where(self, name: str) -> str:
        return f"study {self.study}" if name == "meta" else f"study {self.study}'s {name}"

    def append(self, name: str, item: Any) -> None:
        # the whole log in one record, rewritten in one transaction: a log has one writer at a time
        self.store.put(f"{self.study}/{name}", [*(self.get(name) or []), item])

    def items(self, name: str) -> list[tuple[int, Any]]:
        return list(enumerate(self.get(name) or [], 1))


@dataclass(frozen=True)
class StudyFolder:
    root: Path
    #: the RDB URL of a study kept in a database (then settings and trial records live there too), else None
    storage: str | None = None

    @property
    def name(self) -> str:
        return self.root.name

    @cached_property
    def documents(self) -> Documents:
        """Settings, trial records and checks: files in the folder, or the database's records store."""
        if self.storage:
            return DatabaseDocuments(open_store(self.storage, "records"), self.name)
        return FolderDocuments(self.root)

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

    def cache_in_use(self, meta: StudyMeta) -> Path | str:
        """Where the study's LLM calls and embeddings are cached: its database (a study kept in one), its own
        cache/ (--own-cache, or made before caches were shared), else the project cache it recorded."""
        if meta.cache == "storage":
            if not self.storage:
                raise ConfigError(f"study {self.name} keeps its cache in its database: pass --storage URL")
            return self.storage
        return self.cache.resolve() if meta.cache == "own" else Path(meta.project["cache_dir"])

    def trial_file(self, number: int, held_out: bool = False) -> Path:
        return (self.holdout if held_out else self.trials) / f"{number:04d}.json"

    @staticmethod
    def _trial(number: int, held_out: bool) -> str:
        return f"{'holdout' if held_out else 'trials'}/{number:04d}"

    def write_trial(self, record: TrialFile, held_out: bool = False) -> None:
        self.documents.put(self._trial(record.number, held_out), record.to_json())

    def read_trial(self, number: int, held_out: bool = False) -> TrialFile | None:
        """The trial's file (or its held-out evaluation's), or None when it has none (a trial that failed before
        finishing its first question; a trial the verdict did not score)."""
        name = self._trial(number, held_out)
        data = self.documents.get(name)
        return None if data is None else TrialFile.from_json(data, source=self.documents.where(name))

    def labels(self) -> dict[str, Label]:
        """People's labels of the study's answers, by answer fingerprint (`tuner judge label`)."""
        labels = labels_of(self.documents.items(LABELS_FILE), self.documents.where(LABELS_FILE))
        if self.storage and not labels:  # a database study labelled before labels went through its documents
            return read_labels(self.root / LABELS_FILE)
        return labels

    def add_label(self, label: Label) -> None:
        """Recorded before this returns: a labelling session may be killed after any key."""
        self.documents.append(LABELS_FILE, label.to_json())

    def keep_program(self, path: Path) -> None:
        """A compiled program the study offers, and its sidecar, kept in its documents (under the name its search
        space calls it by), so a worker on another machine can run it. A folder study's own programs/ needs no
        copy."""
        if not self.storage:
            return
        from tuner.compile.saved import sidecar_path

        sidecar = sidecar_path(path)
        self.documents.put(f"programs/{path.resolve()}", {
            "program": json.loads(path.read_text(encoding="utf-8")),
            "sidecar": json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.is_file() else None})

    def program_files(self, programs: list[str]) -> dict[str, Path]:
        """Where this machine reads each compiled program the study offers: its own path where that file is
        here, else a copy written from the study's documents into this folder's programs/ (a worker elsewhere)."""
        from tuner.compile.saved import sidecar_path

        files = {}
        for name in programs:
            kept = None if Path(name).is_file() or not self.storage else self.documents.get(f"programs/{name}")
            if kept is None:
                continue
            copy = self.root / "programs" / Path(name).name
            write_json(copy, kept["program"])
            if kept.get("sidecar") is not None:
                write_json(sidecar_path(copy), kept["sidecar"])
            files[name] = copy
        return files

    def write_doc(self, name: str, data: Any) -> None:
        """A study's named JSON document (its judge check, its judge noise)."""
        self.documents.put(name, data)

    def read_doc(self, name: str) -> Any | None:
        """The document `name`, or None when there is none or it cannot be read (a report never fails on it)."""
        try:
            return self.documents.get(name)
        except DataError:
            return None

    def read_meta(self) -> StudyMeta | None:
        """study.json (or its record in the database), None when there is no such study. When it is gone or torn
        but the storage holds the study, it is rebuilt from the storage's copy."""
        try:
            data = self.documents.get("meta")
            if data is not None:
                if not isinstance(data, dict):
                    raise DataError(f"{self.documents.where('meta')}: unreadable (not a JSON object)")
                return StudyMeta.from_json(data, self.documents.where("meta"))
        except DataError as exc:  # torn, edited, a folder in its place: the storage's copy, if it has one
            meta = None if isinstance(exc, NewerRecord) else self._restore_meta("was unreadable")
            if meta is None:
                raise
            return meta
        return self._restore_meta("was missing")

    def _restore_meta(self, why: str) -> StudyMeta | None:
        if self.storage is None and (not self.journal.is_file() or not self.journal.stat().st_size):
            return None
        meta = stored_meta(make_storage(self), self.name)
        if meta:
            self.write_meta(meta)
            if self.storage is None:
                log.warning(f"{self.meta} {why}: rebuilt from the copy in {self.journal.name}")
        return meta

    def write_meta(self, meta: StudyMeta) -> None:
        self.documents.put("meta", meta.to_json())


def stored_meta(storage: optuna.storages.BaseStorage, name: str) -> StudyMeta | None:
    """The settings copy a study's storage holds (None for a new study, or one from before the copy was kept)."""
    try:
        data = storage.get_study_user_attrs(storage.get_study_id_from_name(name)).get(META_ATTR)
    except KeyError:
        return None
    return StudyMeta.from_json(data, f"study {name} (its storage's copy of study.json)") if data else None


def study_folder(studies_dir: Path, name: str, storage: str | None = None) -> StudyFolder:
    """The study `name`: in studies_dir, or in the database at `storage` (an RDB URL)."""
    if not NAME.match(name):
        raise ConfigError(f"study name {name!r}: use letters, digits, '.', '_' or '-' (up to 100)")
    if storage is not None and "://" not in storage:
        raise ConfigError(f"--storage {storage!r}: give an RDB URL (postgresql://user@host/db, sqlite:///file.db)")
    return StudyFolder(Path(studies_dir) / name, storage)


def no_such_study(name: str, studies_dir: Path | str, storage: str | None = None) -> ConfigError:
    """The one wording of a study that is not there."""
    where, listing = (redact(storage), "tuner studies --storage URL") if storage else (studies_dir, "tuner studies")
    return ConfigError(f"no study named {name!r} in {where} (see `{listing}`)")


def open_existing_study(studies_dir: Path, name: str, storage: str | None = None) -> tuple[StudyFolder, StudyMeta]:
    """A study a command reads or extends (never creates): its folder and meta, or the one error."""
    folder = study_folder(studies_dir, name, storage)
    meta = folder.read_meta()
    if not meta:
        raise no_such_study(name, studies_dir, storage)
    return folder, meta


def cache_location(config: Path | None, study: str | None, storage: str | None, studies_dir: Path) -> Path | str:
    """The cache a command reads: the config's cache_dir, or the one a study uses (its folder's, the project's
    or its database's)."""
    from tuner.config import load_config

    if study is None:
        if storage is not None:
            raise ConfigError("--storage: give the --study whose database cache you mean")
        return load_config(config).cache_dir
    folder, meta = open_existing_study(studies_dir, study, storage)
    return folder.cache_in_use(meta)


#: seconds between a running trial's heartbeats in an RDB storage; a trial silent for 3 of them is failed and
#: retried by another worker
HEARTBEAT = 60


def make_storage(folder: StudyFolder, heartbeat: int = HEARTBEAT) -> optuna.storages.BaseStorage:
    url = folder.storage
    if url is None:
        from optuna.storages.journal import JournalFileBackend

        folder.root.mkdir(parents=True, exist_ok=True)
        for note in (release_stale_lock(folder.journal), repair_journal(folder.journal)):
            if note:
                log.warning(note)
        try:
            return optuna.storages.JournalStorage(JournalFileBackend(str(folder.journal),
                                                                     journal_lock(folder.journal)))
        except (ValueError, KeyError, IndexError) as exc:  # entries Optuna cannot replay: report, never rewrite
            raise DataError(f"{folder.journal}: Optuna cannot replay this journal ({type(exc).__name__}: "
                            f"{first_line(exc)})") from None
    import warnings

    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    def connect() -> RDBStorage:
        with warnings.catch_warnings():  # heartbeats are marked experimental, yet they are what multi-worker needs
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(url, heartbeat_interval=heartbeat, grace_period=3 * heartbeat,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3))

    try:
        return while_others_create_tables(connect)
    except Exception as exc:  # sqlalchemy raises many kinds for a bad URL or an unreachable server
        raise ConfigError(f"--storage {redact(url)}: {described(exc)}") from None


#: a writer holds the journal lock for the milliseconds of one append: one held this long with no write was left by a
#: process killed mid-append
STALE_LOCK_SECONDS = 5.0


def journal_lock(path: Path):
    """Optuna's lock on the journal, named by its absolute path. The lock is a symlink to the journal and Optuna judges
    it stale by the target's mtime: with a relative path the symlink dangles, the lock left by a kill is never judged
    stale, and every later run waits for it forever."""
    from optuna.storages.journal import JournalFileSymlinkLock

    return JournalFileSymlinkLock(str(path.resolve()))


def release_stale_lock(path: Path, patience: float = STALE_LOCK_SECONDS) -> str | None:
    """Remove a journal lock no live writer holds: the same lock (same inode) for `patience` seconds while the journal
    does not change. Returns a line saying so, or None when there was no such lock."""
    # private (optuna.storages.journal._file): the suffix JournalFileSymlinkLock appends; if Optuna renames it,
    # a stale lock is no longer found and released, and a study after a kill -9 waits on it (pinned: optuna==5.0.0)
    from optuna.storages.journal._file import LOCK_FILE_SUFFIX

    lock = path.with_name(path.name + LOCK_FILE_SUFFIX)

    def state() -> tuple[int, int, int] | None:
        try:
            journal = path.stat() if path.exists() else None
            return (lock.lstat().st_ino, journal.st_size if journal else -1, journal.st_mtime_ns if journal else -1)
        except FileNotFoundError:
            return None

    seen, since = state(), time.monotonic()
    while seen is not None:
        if time.monotonic() - since >= patience:
            try:  # rename first, as Optuna does, so only one of several openers removes it
                aside = lock.with_name(f"{lock.name}.{os.getpid()}.stale")
                os.rename(lock, aside)
                os.unlink(aside)
            except FileNotFoundError:
                return None
            return (f"{lock}: removed the journal lock a process killed mid-write left behind (held {patience:.0f} s "
                    f"with no write); the study goes on")
        time.sleep(0.05)
        now = state()
        if now != seen:  # released, or taken again by a live writer: watch afresh
            seen, since = now, time.monotonic()
    return None


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
    lock = journal_lock(path)
    lock.acquire()
    try:
        kept, torn, damaged = _split_torn(path.read_bytes())
        if not torn:
            return None
        with open(path.with_name(path.name + ".torn"), "ab") as aside:
            aside.write(b"".join(t + b"\n" for t in torn))
        repaired = path.with_name(path.name + ".repair")
        repaired.write_bytes(b"".join(line + b"\n" for line in kept))
        repaired.replace(path)  # atomic: the journal is either the old one or the repaired one
    finally:
        lock.release()
    if damaged:  # a kill only ever cuts the last entry: this is damage to the file itself
        return (f"{path}: set aside {damaged} damaged entr{'y' if damaged == 1 else 'ies'} from the middle of the "
                f"journal ({sum(map(len, torn))} bytes; a kill cannot leave that: disk damage or an edit) in "
                f"{path.name}.torn; every readable entry is kept, and a trial the damage left unfinished is completed "
                f"from its trial file, or else run again")
    return (f"{path}: set aside {sum(map(len, torn))} bytes of a half-written journal entry (left by a kill or a "
            f"power cut mid-write) in {path.name}.torn; every complete entry is kept")


def _entry(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        return False


def _sound(data: bytes) -> bool:
    return not data or (data.endswith(b"\n") and all(_entry(line) for line in data.splitlines() if line))


def _split_torn(data: bytes) -> tuple[list[bytes], list[bytes], int]:
    """The whole entries of a journal, the fragments around them, and how many of those are damage in the middle:
    a line that is no entry yet is followed by whole ones, not a torn last entry (glued to the next: a resume
    appended after a kill's fragment)."""
    *lines, tail = data.split(b"\n")
    kept, torn, damaged = [], [tail] if tail else [], 0
    lines = list(filter(None, lines))
    for number, line in enumerate(lines):
        if _entry(line):
            kept.append(line)
            continue
        start = line.rfind(ENTRY_START)
        if start > 0 and _entry(line[start:]):
            kept.append(line[start:])
            torn.append(line[:start])
        else:
            torn.append(line)
            damaged += number < len(lines) - 1  # the last line alone may be a kill's (older Optuna wrote "\n")
    return kept, torn, damaged
