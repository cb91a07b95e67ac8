"""A folder of documents -> a BEIR-layout corpus: `tuner data ingest DIR --out DATASET`.

One document per file (id = its path relative to DIR), read by the reader its suffix names. A re-run parses only
the files whose content changed (sha256 recorded in DATASET/ingest.json) and drops the documents of files that are
gone. Every file left out is listed with its reason: nothing is skipped silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tuner.data._io import read_json, read_jsonl
from tuner.data.ingest._base import Parsed, Reader, Unreadable
from tuner.data.ingest._docx import DocxReader
from tuner.data.ingest._html import HtmlReader
from tuner.data.ingest._pdf import PdfReader
from tuner.data.ingest._text import TextReader
from tuner.errors import DataError
from tuner.files import special, write_atomically, write_json

__all__ = ["READERS", "IngestReport", "LeftOut", "Parsed", "Reader", "Unreadable", "ingest", "read_file"]

READERS: tuple[Reader, ...] = (TextReader(), HtmlReader(), PdfReader(), DocxReader())
BY_SUFFIX = {suffix: reader for reader in READERS for suffix in reader.suffixes}
MANIFEST = "ingest.json"


@dataclass(frozen=True)
class LeftOut:
    path: str
    reason: str


@dataclass
class IngestReport:
    out: Path
    documents: int = 0
    #: parsed by this run (new or changed files), and kept as the last run read them (same content)
    read: int = 0
    unchanged: int = 0
    #: documents whose files are gone since the last run
    removed: int = 0
    left_out: list[LeftOut] = field(default_factory=list)
    #: files and folders whose names start with a dot (.git, .DS_Store): never read
    hidden: int = 0


def read_file(path: Path) -> Parsed:
    """One file as a document, or Unreadable with the reason it is left out."""
    reader = BY_SUFFIX.get(path.suffix.lower())
    if reader is None:
        raise Unreadable(f"unknown type ({path.suffix or 'no suffix'})")
    if path.stat().st_size == 0:
        raise Unreadable("empty file")
    parsed = reader.read(path)
    if not parsed.text:
        raise Unreadable("no text in it")
    return parsed


def ingest(folder: Path, out: Path, on_file: Callable[[int, int], None] | None = None) -> IngestReport:
    """Write out/corpus.jsonl from the files under `folder`; `on_file(done, total)` after each file."""
    folder, out = Path(folder), Path(out)
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder")
    files, hidden = walk(folder)
    if not files:
        raise DataError(f"{folder}: no files to read (hidden files and folders, e.g. .git, are not read)")
    manifest, kept = previous_run(out)
    report = IngestReport(out=out, hidden=hidden)
    entries, documents = {}, []
    for done, path in enumerate(files, 1):
        name = path.relative_to(folder).as_posix()
        entry, document = read_one(path, name, manifest.get(name), kept.get(name))
        entries[name] = entry
        if document is None:
            report.left_out.append(LeftOut(name, entry["left_out"]))
        else:
            documents.append(document)
        report.unchanged += entry is manifest.get(name) and document is not None
        if on_file:
            on_file(done, len(files))
    report.read = len(documents) - report.unchanged
    report.removed = len(set(kept) - set(entries))
    report.documents = len(documents)
    if not documents:
        raise DataError(f"{folder}: nothing readable — all {len(files)} file(s) left out (first: "
                        f"{report.left_out[0].path}: {report.left_out[0].reason})")
    out.mkdir(parents=True, exist_ok=True)
    write_atomically(out / "corpus.jsonl", "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents))
    write_json(out / MANIFEST, {"schema": 1, "source": str(folder.resolve()), "files": entries})
    return report


def walk(folder: Path) -> tuple[list[Path], int]:
    """Every file under `folder` in a stable order, and how many hidden entries were passed over."""
    files, hidden = [], 0
    for root, dirs, names in os.walk(folder):
        hidden += sum(d.startswith(".") for d in dirs) + sum(n.startswith(".") for n in names)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [Path(root) / n for n in sorted(names) if not n.startswith(".")]
    return files, hidden


def previous_run(out: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """The last run's files (name -> sha256 and reason) and its documents by id; refuses to overwrite a corpus
    that no ingest wrote."""
    if not (out / MANIFEST).is_file():
        if (out / "corpus.jsonl").exists():
            raise DataError(f"{out}: holds a corpus.jsonl that `tuner data ingest` did not write; choose another "
                            f"--out (ingest never overwrites a dataset it did not make)")
        return {}, {}
    manifest = read_json(out / MANIFEST)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise DataError(f"{out / MANIFEST}: not an ingest manifest; delete it (and corpus.jsonl) to ingest afresh")
    kept = {str(row.get("_id")): row for row in read_jsonl(out / "corpus.jsonl")} if (out / "corpus.jsonl").is_file() \
        else {}
    return manifest["files"], kept


def read_one(path: Path, name: str, last: dict | None, kept: dict | None) -> tuple[dict, dict | None]:
    """The manifest entry of one file and its corpus row (None when left out): the last run's when the content is
    the same, else parsed now. A pipe, socket or device is left out unopened: opening a pipe blocks forever."""
    kind = special(path)
    if kind is not None:
        return {"sha256": None, "left_out": f"{kind}, not a file: not opened"}, None
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return {"sha256": None, "left_out": f"cannot read ({exc.strerror})"}, None
    if last is not None and last.get("sha256") == digest and (kept is not None or last.get("left_out")):
        return last, kept
    try:
        parsed = read_file(path)
    except Unreadable as exc:
        return {"sha256": digest, "left_out": str(exc)}, None
    except Exception as exc:  # a reader's bug on one odd file must not end the ingest of the rest
        return {"sha256": digest, "left_out": f"reader failed ({type(exc).__name__}: {str(exc)[:80]})"}, None
    return {"sha256": digest, "left_out": None}, {"_id": name, "title": parsed.title, "text": parsed.text}
