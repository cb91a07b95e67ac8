"""Files as tuner meets them. What a path is, asked before tuner opens it: opening a named pipe blocks until
something writes to it (an ingest of a folder holding one never returned), and a socket or a device is no document.
Every reader of a folder, and of a file named on the command line, asks here first. And how tuner writes one:
atomically, so a reader or a kill -9 never meets half a file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tuner.errors import DataError

KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def special(path: Path | str) -> str | None:
    """What `path` is when it exists and is neither a regular file nor a folder ("a named pipe (FIFO)", "a socket",
    "a character device", "a block device"); None otherwise. Only stat()ed, never opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return next((name for test, name in KINDS if test(mode)), None)


def refuse_special(path: Path | str, error: type[Exception] = DataError) -> None:
    """One line instead of a read that blocks forever (a pipe) or reads a device."""
    kind = special(path)
    if kind is not None:
        raise error(f"{path}: is {kind}, not a file; tuner reads regular files only")


def write_atomically(path: Path, text: str) -> None:
    """Write through a sibling file and rename it over `path`: a reader, or a kill during the write, sees the old
    file or the new one, never half of one. The sibling is named per process, so two writers never share it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        with open(partial, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())  # the rename must not reach the disk before the bytes do
        partial.replace(path)
    except OSError as exc:  # a folder where the file belongs, a full disk: the error names the file, nothing is left
        partial.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def write_json(path: Path, data: Any, indent: int = 1) -> None:
    """`data` as a JSON file, atomically (see write_atomically); values JSON lacks are written as text."""
    write_atomically(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n")


def append_json_line(path: Path, value: Any) -> None:
    """`value` as one JSON line at the end of `path`, on the disk before this returns (a kill after it loses
    nothing; a kill during it leaves a torn last line, which `read_json_lines` leaves out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(value, ensure_ascii=False) + "\n")
        out.flush()
        os.fsync(out.fileno())


def read_json_lines(path: Path) -> list[tuple[int, Any]]:
    """(line number, value) of each JSON line of `path` ([] when there is no file); a torn last line (a kill
    mid-append) is left out, any other line that is not JSON is a DataError naming it."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    values = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            values.append((number, json.loads(line)))
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise DataError(f"{path}:{number}: not a JSON line") from None
    return values
