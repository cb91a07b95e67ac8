"""User-facing errors: the CLI prints them as one line and exits non-zero, never a traceback."""


class TunerError(Exception):
    """An error caused by the user's input or environment, explained in one line."""

    exit_code = 1


class ConfigError(TunerError):
    """A configuration or search-space file is missing, malformed or wrongly typed."""

    exit_code = 2


class DataError(TunerError):
    """A dataset is missing, unreadable or empty."""

    exit_code = 2


class NewerRecord(DataError):
    """A record written by a newer tuner: not damage, so no older copy is put in its place."""


class Stopped(KeyboardInterrupt):
    """SIGTERM (`timeout`, systemd, `docker stop`, a CI runner's cancel) or SIGHUP (a closed ssh session): unwinds as
    Ctrl-C does — the running trial marked interrupted with the signal's name, the report written — and the process
    exits 128 + the signal's number."""

    def __init__(self, name: str, number: int):
        super().__init__(name)
        self.name = name
        self.exit_code = 128 + number


def interruption(exc: KeyboardInterrupt) -> str:
    """What stopped a trial, as its `interrupted` mark says it: Ctrl-C, SIGTERM or SIGHUP."""
    return exc.name if isinstance(exc, Stopped) else "Ctrl-C"
