"""The one place that decides how tuner talks to the terminal."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

console = Console()  # results: tables, summaries
err_console = Console(stderr=True)  # progress, notes and errors, so results can be piped


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
