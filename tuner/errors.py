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


def first_line(what: BaseException | str, limit: int = 200) -> str:
    """The first line of an error's message (or of a text), cut at `limit`, for a one-line error; an error that
    says nothing gives its type's name, an empty text "(no message)"."""
    if isinstance(what, BaseException) and callable(getattr(what, "errors", None)):
        what = "; ".join(str(error.get("msg", error)) for error in what.errors())  # pydantic: its first line counts
    text = str(what).strip()
    if text:
        return text.splitlines()[0][:limit]
    return type(what).__name__ if isinstance(what, BaseException) else "(no message)"


def described(exc: BaseException, limit: int = 200) -> str:
    """'TypeName: first line of its message', or the type's name alone when the message is empty."""
    text = first_line(exc, limit)
    return text if text == type(exc).__name__ else f"{type(exc).__name__}: {text}"
