"""The `tuner` command line: one module per command group, each command a thin adapter over the library (the
rules live below: study/, compile/, analysis/, ...). Heavy libraries are imported inside commands, after tuner
set its offline environment."""

from __future__ import annotations

import signal
import sys
import tempfile
import traceback

# isort: off
import tuner  # noqa: F401  (sets offline environment defaults first)
from tuner.cli._app import app
# each module registers its commands, in the order `tuner --help` lists them
from tuner.cli import evaluate, compare, data, study, spaces, compile, judge, system, cache, models  # noqa: F401
# isort: on
from tuner.cli._display import show_library_messages
from tuner.cli._interrupt import announced, exit_code, leave, stop_name, stop_promptly
from tuner.errors import ERROR, INTERNAL_ERROR, SIGNALLED, SUCCESS, TunerError, described
from tuner.ui import error

__all__ = ["app", "main"]

def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit; Ctrl-C exits 130, SIGTERM
    143 and SIGHUP 129 (Typer turns the KeyboardInterrupt into 130, the watcher says so at once)."""
    stop_promptly()
    show_library_messages()
    try:
        app()
    except SystemExit as exc:
        stopped = exit_code()
        if stopped is None:
            sys.exit(exc.code)
        announced.wait(1)  # the watcher's thread says it; leaving first would kill it unsaid
        code = exc.code if isinstance(exc.code, int) else ERROR if exc.code else SUCCESS
        leave(stopped if code == SIGNALLED + signal.SIGINT else code)
    except TunerError as exc:
        error(str(exc))
        sys.exit(exc.exit_code)
    except OSError as exc:  # read-only folder, disk full, a file where a folder should be: the system's words
        if (stopped := exit_code()) is not None:  # a journal write cut by the interrupt (its lock file renamed
            leave_stopped(stopped)  # away under it): a stop, as asked
        where = f": {exc.filename}" if exc.filename else ""
        error(f"{exc.strerror or exc}{where}")
        sys.exit(ERROR)
    except Exception as exc:  # a defect of tuner's: one line to read, the traceback kept for the bug report
        if (stopped := exit_code()) is not None:  # a library broke as the interrupt unwound it (optuna's
            # _run_trial reads a state it never set): a stop, as asked, not a defect
            leave_stopped(stopped)
        error(f"internal error: {described(exc)} — a defect in tuner, not in your input (what finished is kept); "
              f"{keep_traceback(exc)}")
        sys.exit(INTERNAL_ERROR)


def leave_stopped(code: int) -> None:
    """Leave as the stop in progress asked (its exit code), the running trial marked interrupted: what broke while
    the interrupt unwound the work is the stop's doing, not a defect or the user's input."""
    from tuner.study.running import mark_interrupted

    mark_interrupted(stop_name(code - SIGNALLED))
    announced.wait(1)
    leave(code)


def keep_traceback(exc: BaseException) -> str:
    """Write the exception's traceback to a file of its own (no local variables: nothing secret); what to report,
    in words (the file's path, or why there is none: the line is still one line)."""
    try:
        with tempfile.NamedTemporaryFile("w", prefix="tuner-error-", suffix=".txt", delete=False) as file:
            file.write("".join(traceback.format_exception(exc)))
    except OSError as why:
        return f"please report it with this line (its traceback could not be written: {why.strerror or why})"
    return f"please report it with {file.name}"
