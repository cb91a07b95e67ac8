"""Ctrl-C, SIGTERM and SIGHUP: unwind as a KeyboardInterrupt (the trial is marked interrupted, the report written),
or leave at once when that does not begin in time."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from tuner import ui
from tuner.errors import Stopped

#: seconds a stop may take to reach tuner's own clean-up, and then to finish it, before the process leaves anyway
INTERRUPT_GRACE = (2.0, 30.0)
#: seconds after a stop signal that replies still in flight may take to arrive and be cached; the report is written
#: meanwhile, so a stop still takes about this long at most
KEEP_REPLIES = 1.5
#: set when tuner's own clean-up after a stop has begun (writing the study report); the process exits after it
cleaning_up = threading.Event()
#: what stops tuner as Ctrl-C does: `timeout`, systemd, `docker stop` and CI cancels send SIGTERM, a closed ssh
#: session SIGHUP; each exits 128 + its number (130, 143, 129)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: set once the watcher has said "interrupted …: stopping"; a command that unwinds at once waits for it to be said
announced = threading.Event()
#: the stop signals this process received, first first
received: list[int] = []
#: when the first one came (time.monotonic())
received_at: list[float] = []
#: what must still happen when the process leaves without unwinding (the study's report)
_before_forced_exit: list = []


def before_forced_exit(callback) -> None:
    """`callback()` runs on the watcher thread when a stop cannot unwind in time (a model's native call holds the
    main thread): the report of the night is written all the same."""
    _before_forced_exit.append(callback)


def exit_code() -> int | None:
    """128 + the first stop signal's number, once one arrived."""
    return 128 + received[0] if received else None


def _note(number: int) -> None:
    received.append(number)
    if not received_at:
        received_at.append(time.monotonic())


def _raise_stopped(number: int, frame) -> None:
    _note(number)
    if number == signal.SIGHUP:
        _quiet_a_hung_up_terminal()
    raise Stopped(signal.Signals(number).name, number)


class _MayBeGone:
    """A terminal stream that SIGHUP may have taken away: a write that fails (EIO) is dropped, so the clean-up (the
    report) is not stopped by its own messages; while the terminal lives, everything is shown as before."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _quiet_a_hung_up_terminal() -> None:
    """After SIGHUP, writes to the terminal may fail; output to a file or pipe is left as it is."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _MayBeGone) and stream.isatty():
            setattr(sys, name, _MayBeGone(stream))
    for console in (ui.console, ui.err_console):
        if not isinstance(console.file, _MayBeGone) and console.file.isatty():
            console.file = _MayBeGone(console.file)


def _raise_interrupt(number: int, frame) -> None:
    _note(number)
    raise KeyboardInterrupt


def stop_name(number: int) -> str:
    """A stop signal as a trial's `interrupted` mark says it: Ctrl-C, SIGTERM or SIGHUP."""
    return "Ctrl-C" if number == signal.SIGINT else signal.Signals(number).name


def leave(code: int) -> None:
    """Exit after a stop: the calls still in flight get until KEEP_REPLIES after the signal to arrive (a reply that
    came is cached, not paid for again on resume; one that did not was never received), then the process leaves
    without the interpreter's shutdown, which takes seconds with torch loaded and would only wait. The journal and
    the caches are written entry by entry: nothing is lost by that."""
    from tuner.evaluation.in_order import settle

    settle(received_at[0] + KEEP_REPLIES if received_at else 0.0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a terminal gone with SIGHUP
            pass
    os._exit(code)


def stop_promptly(grace: tuple[float, float] = INTERRUPT_GRACE) -> None:
    """Ctrl-C, SIGTERM and SIGHUP unwind as a KeyboardInterrupt: the trial is marked interrupted, the report
    written. If that has not begun `grace[0]` seconds later — Python only sees the signal between bytecodes, a model
    can sit in one native call for many seconds, and a library may swallow the interrupt — the process leaves at
    once with 128 + the signal. Nothing is lost by that: the journal and the caches are written entry by entry, and
    a trial left running is run again on resume. The C-level handler writes to the wakeup fd even while the main
    thread is in native code, so the watcher thread hears every signal at once; a second one leaves without
    waiting. Before leaving it marks the running trial interrupted itself. A signal the parent set to be ignored
    (`nohup` ignores SIGHUP) stays ignored."""
    import socket

    from tuner.study.running import any_running, mark_interrupted

    if threading.current_thread() is not threading.main_thread():
        return
    for number in STOP_SIGNALS:
        if signal.getsignal(number) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(number, _raise_interrupt if number == signal.SIGINT else _raise_stopped)
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    signal.set_wakeup_fd(theirs.fileno(), warn_on_full_buffer=False)

    def heard(timeout: float | None) -> int | None:
        """The next stop signal's number; None when none came within `timeout`."""
        ours.settimeout(timeout)
        try:
            while (number := ours.recv(1)[0]) not in STOP_SIGNALS:
                pass
        except TimeoutError:
            return None
        return number

    def watch(wakeup: socket.socket) -> None:  # holds the signal's end: were it collected, the fd would close
        number = heard(None)
        if number == signal.SIGHUP:  # the main thread may be in native code: its handler has not run yet
            _quiet_a_hung_up_terminal()
        by = "" if number == signal.SIGINT else f" by {signal.Signals(number).name}"
        # only a study's trial runs again: an interrupted `eval` or `judge check` has nothing to resume
        try:  # after SIGHUP the terminal may be gone: the exit below matters more than the line
            ui.err_console.print(f"[red]interrupted[/]{by}: stopping" + ("; run the same command again to resume (the "
                              "trial in progress runs again)" if any_running() else ""), markup=True, highlight=False,
                              soft_wrap=True)
        except OSError:
            pass
        announced.set()
        if heard(grace[0]) is None and cleaning_up.is_set():
            heard(grace[1])  # the clean-up may take longer, unless a signal comes again
        mark_interrupted(stop_name(number))
        if not cleaning_up.is_set():  # the unwinding never reached tuner's clean-up: do its part here
            for callback in _before_forced_exit:
                try:
                    callback()
                except Exception:  # leaving matters more; the study itself is safe on disk
                    pass
        os._exit(128 + number)

    threading.Thread(target=watch, args=(theirs,), name="stop watcher", daemon=True).start()
