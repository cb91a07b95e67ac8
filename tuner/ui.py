"""The one place that decides how tuner talks to the terminal."""

from __future__ import annotations

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
