"""The one place that decides how tuner talks to the terminal."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

#: columns when the output is no terminal (a log, CI, nohup): rich's 80 cut table headers to "jud…"
PIPED_WIDTH = 200


def _console(stderr: bool = False) -> Console:
    """Terminal width on a terminal; without one, wide enough for every table (COLUMNS still wins)."""
    made = Console(stderr=stderr)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made.width = PIPED_WIDTH
    return made


console = _console()  # results: tables, summaries
err_console = _console(stderr=True)  # progress, notes and errors, so results can be piped


def progress(transient: bool = False) -> Progress:
    """A progress bar for long work (indexing, evaluation); quiet when stderr is not a terminal."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
        disable=not err_console.is_terminal,
    )


@contextlib.contextmanager
def terminal_kept() -> Iterator[None]:
    """tuner's consoles keep writing to the terminal while library code redirects sys.stdout and sys.stderr (a
    compile sends DSPy's chatter to a log): pinned to the streams they write to now, then following sys again."""
    console.file, err_console.file = console.file, err_console.file
    try:
        yield
    finally:
        console.file = err_console.file = None


def knobs(values: Mapping[str, Any]) -> str:
    """`top_k=5, alpha=0.7, ...`; floats short (a stepped Optuna float is 0.7000000000000001), unset knobs left out."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items() if v is not None)
