"""What a path is, asked before tuner opens it: opening a named pipe blocks until something writes to it (an ingest
of a folder holding one never returned), and a socket or a device is no document. Every reader of a folder, and of
a file named on the command line, asks here first."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
