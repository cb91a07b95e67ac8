"""The one place that decides how tuner talks to the terminal."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

#: columns when the output is no terminal (a log, CI, nohup): rich's 80 cut table headers to "jud…"
PIPED_WIDTH = 200


def _console(stderr: bool = False) -> Console:
    """Terminal width on a terminal; without one, wide enough for every table (COLUMNS still wins). Markup only
    where a print asks for it (markup=True, its values escaped): text tuner prints — paths, questions, errors,
    advice such as `pip install 'rag-tuner[openvino]'` — keeps its square brackets."""
    made = Console(stderr=stderr, markup=False)
    if not made.is_terminal and "COLUMNS" not in os.environ:
        made.width = PIPED_WIDTH
    return made


console = _console()  # results: tables, summaries
err_console = _console(stderr=True)  # progress, notes and errors, so results can be piped


def _labelled(label: str, style: str, text: str) -> None:
    err_console.print(Text.assemble((label, style), " ", str(text)), highlight=False, soft_wrap=True)


def note(text: str) -> None:
    """`note: …` on stderr (the label yellow on a terminal), the text as it is."""
    _labelled("note:", "yellow", text)


def warning(text: str) -> None:
    _labelled("warning:", "yellow", text)


def error(text: str) -> None:
    _labelled("error:", "red", text)


def log_every() -> float:
    """Seconds between the lines long work writes when stderr is no terminal (a log, CI, nohup): 30, or
    TUNER_LOG_EVERY."""
    try:
        return max(float(os.environ.get("TUNER_LOG_EVERY", "30")), 0.05)
    except ValueError:
        return 30.0


def duration(seconds: float) -> str:
    """`42 s`, `3 min 5 s`, `2 h 10 min`."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


class Heartbeat:
    """A line to the log every `log_every()` seconds while long work runs with no terminal to draw on. A thread
    writes it, so the log hears from a step even while one item (a model call, an embedding batch) takes minutes."""

    def __init__(self, lines: Callable[[], list[str]]):
        self.lines = lines
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(log_every()):
            for line in self.lines():
                err_console.print(line, highlight=False, soft_wrap=True)
                self.beats += 1


class Waiting(Heartbeat):
    """While one call waits for `what` to reply (up to `tries` tries of `timeout` seconds): a line every
    `log_every()` seconds saying so, so the first line written while nothing moves says why, not minutes later. The
    caller that retries sets `attempt`; else it is told from the time waited."""

    def __init__(self, what: str, timeout: float, tries: int):
        self.what, self.timeout, self.tries = what, timeout, tries
        self.attempt: int | None = None
        self.started = time.monotonic()
        super().__init__(self._line)

    def _line(self) -> list[str]:
        waited = time.monotonic() - self.started
        attempt = self.attempt or min(int(waited // self.timeout) + 1, self.tries)
        return [f"waiting: no reply from {self.what} in {duration(waited)}, try {attempt} of {self.tries} "
                f"({self.timeout:g} s each)"]


class Bar(Progress):
    """rich's progress bars on a terminal; in a log, a line per unfinished task every `log_every()` seconds (done,
    rate, time left), and when a task that was logged ends, a line saying so. A task added with `log=False` is
    left out of the log (its own lines say more)."""

    _heartbeat: Heartbeat | None = None

    def start(self) -> None:
        super().start()
        if self.disable:
            self._heartbeat = Heartbeat(lambda: [self.describe(t) for t in self.tasks if self._logged(t)])
            self._heartbeat.__enter__()

    def stop(self) -> None:
        heartbeat = self._heartbeat
        if heartbeat is not None:
            self._heartbeat = None
            heartbeat.__exit__()
            if heartbeat.beats:  # the log heard of these: it hears that they ended too
                for task in self.tasks:
                    if task.fields.get("log", True) and task.visible and task.completed:
                        err_console.print(f"{task.description}: {task.completed:,.0f}"
                                          + (f"/{task.total:,.0f}" if task.total else "") +
                                          f" done in {duration(Bar.took(task))}", highlight=False, soft_wrap=True)
        super().stop()

    @staticmethod
    def took(task) -> float:
        """A task's seconds until it finished: a step done early (the embedding before the questions) is not timed
        until the bars close."""
        return task.finished_time if task.finished_time is not None else task.elapsed or 0.0

    @staticmethod
    def _logged(task) -> bool:
        return task.visible and not task.finished and task.fields.get("log", True)

    @staticmethod
    def describe(task) -> str:
        """`embedding chunks: 1,200/9,700 (4.1/s, about 35 min left)`."""
        done, total, elapsed = task.completed, task.total, task.elapsed or 0.0
        line = f"{task.description}: {done:,.0f}" + (f"/{total:,.0f}" if total else "")
        if done and elapsed:
            rate = done / elapsed
            line += f" ({rate:.3g}/s" + (f", about {duration((total - done) / rate)} left)" if total else ")")
        return line + f", {duration(elapsed)} so far"


def progress(transient: bool = False) -> Progress:
    """A progress bar for long work (indexing, evaluation); a line every 30 s when stderr is not a terminal."""
    return Bar(
        TextColumn("{task.description}", markup=False, style="progress.description"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
        disable=not err_console.is_terminal,
    )


@contextlib.contextmanager
def status(message: str, spinner: bool = True) -> Iterator[None]:
    """A spinner with `message` on a terminal (none with `spinner=False`: the work draws its own bar there); in a
    log, `message: still running, N s so far` every 30 s."""
    if err_console.is_terminal:
        with err_console.status(message) if spinner else contextlib.nullcontext():
            yield
        return
    started = time.monotonic()
    with Heartbeat(lambda: [f"{message}: still running, {duration(time.monotonic() - started)} so far"]):
        yield


@contextlib.contextmanager
def terminal_kept() -> Iterator[None]:
    """tuner's consoles keep writing to the terminal while library code redirects sys.stdout and sys.stderr (a
    compile sends DSPy's chatter to a log): pinned to the streams they write to now, then following sys again."""
    console.file, err_console.file = console.file, err_console.file
    try:
        yield
    finally:
        console.file = err_console.file = None


@contextlib.contextmanager
def stdout_for_results() -> Iterator[Any]:
    """The real stdout, kept for a command's machine-readable result (`--json`), while everything else printed
    meanwhile goes to stderr: a user's system or a library that prints would otherwise come first and break the
    JSON for whoever parses it."""
    results, sys.stdout = sys.stdout, sys.stderr
    try:
        yield results
    finally:
        sys.stdout = results


def knobs(values: Mapping[str, Any]) -> str:
    """`top_k=5, alpha=0.7, ...`; floats short (a stepped Optuna float is 0.7000000000000001), unset knobs left out."""
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items() if v is not None)
