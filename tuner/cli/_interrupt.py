"""Ctrl-C: unwind as a KeyboardInterrupt (the trial is marked interrupted, the report written), or leave at once
when that does not begin in time."""

from __future__ import annotations

import os
import threading

from tuner.ui import err_console


#: seconds Ctrl-C may take to reach tuner's own clean-up, and then to finish it, before the process leaves anyway
INTERRUPT_GRACE = (2.0, 30.0)
#: set when tuner's own clean-up after Ctrl-C has begun (writing the study report); the process exits after it
cleaning_up = threading.Event()


def stop_promptly_on_ctrl_c(grace: tuple[float, float] = INTERRUPT_GRACE) -> None:
    """Ctrl-C unwinds as a KeyboardInterrupt: the trial is marked interrupted, the report written. If that has not
    begun `grace[0]` seconds later — Python only sees the signal between bytecodes, a model can sit in one native
    call for many seconds, and a library may swallow the interrupt — the process leaves at once with 130. Nothing
    is lost by that: the journal and the caches are written entry by entry, and a trial left running is run again
    on resume. The C-level handler writes to the wakeup fd even while the main thread is in native code, so the
    watcher thread hears every Ctrl-C at once; a second Ctrl-C leaves without waiting. Before leaving it marks the
    running trial interrupted itself."""
    import signal
    import socket

    from tuner.study.running import any_running, mark_interrupted

    if threading.current_thread() is not threading.main_thread():
        return
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    signal.set_wakeup_fd(theirs.fileno(), warn_on_full_buffer=False)

    def heard_ctrl_c(timeout: float | None) -> bool:
        ours.settimeout(timeout)
        try:
            while ours.recv(1) != bytes([signal.SIGINT]):
                pass
        except TimeoutError:
            return False
        return True

    def watch(wakeup: socket.socket) -> None:  # holds the signal's end: were it collected, the fd would close
        heard_ctrl_c(None)
        # only a study's trial runs again: an interrupted `eval` or `judge check` has nothing to resume
        err_console.print("[red]interrupted[/]: stopping" + ("; run the same command again to resume (the trial in "
                          "progress runs again)" if any_running() else ""), highlight=False, soft_wrap=True)
        if not heard_ctrl_c(grace[0]) and cleaning_up.is_set():
            heard_ctrl_c(grace[1])  # the clean-up may take longer, unless Ctrl-C comes again
        mark_interrupted()  # what the unwinding did not reach: the running trial says interrupted, not running
        os._exit(130)

    threading.Thread(target=watch, args=(theirs,), name="ctrl-c watcher", daemon=True).start()
