"""The `tuner` command line: one module per command group, each command a thin adapter over the library (the
rules live below: study/, compile/, analysis/, ...). Heavy libraries are imported inside commands, after tuner
set its offline environment."""

from __future__ import annotations

import sys

import tuner  # noqa: F401  (sets offline environment defaults first)
from tuner.cli._app import app
# each module registers its commands, in the order `tuner --help` lists them
from tuner.cli import evaluate, compare, data, study, spaces, compile, judge, cache, models  # noqa: F401, E402
from tuner.cli._display import show_library_messages
from tuner.cli._interrupt import stop_promptly_on_ctrl_c
from tuner.errors import TunerError
from tuner.ui import err_console

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit; Ctrl-C exits 130 (Typer
    turns the KeyboardInterrupt into that exit, the watcher says so at once)."""
    stop_promptly_on_ctrl_c()
    show_library_messages()
    try:
        app()
    except TunerError as exc:
        err_console.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # read-only folder, disk full, a file where a folder should be: the system's words
        where = f": {exc.filename}" if exc.filename else ""
        err_console.print(f"[red]error:[/] {exc.strerror or exc}{where}", highlight=False, soft_wrap=True)
        sys.exit(1)
