"""User-facing errors and the exit codes they leave with, in one place: the CLI prints an error as one line and
exits with its code, never a traceback. Each root below has its subclasses beside the code that raises them
(`PromptTooLong` in models/llms, `Unreachable`, `BadReply` and `Rejected` in systems)."""

#: the exit codes, one table (pip's status_codes.py)
SUCCESS = 0
#: a TunerError (an LLM that cannot be used, a system that cannot be reached or whose call failed), an OSError,
#: `compare`'s real loss, a study with no finished trial (every trial failed, however it stopped: its --trials, its
#: --timeout or a search space exhausted)
ERROR = 1
#: input the user can fix: a config, a search space, a dataset; a system's reply tuner cannot read (`BadShape`) or
#: its refusal of the knobs (`Rejected`), whichever command met it
BAD_INPUT = 2
#: a defect of tuner's (sysexits' EX_SOFTWARE)
INTERNAL_ERROR = 70
#: a stop by signal leaves with this plus its number: Ctrl-C 130, SIGHUP 129, SIGTERM 143
SIGNALLED = 128


class TunerError(Exception):
    """An error caused by the user's input or environment, explained in one line."""

    exit_code = ERROR


class ConfigError(TunerError):
    """A configuration or search-space file is missing, malformed or wrongly typed."""

    exit_code = BAD_INPUT


class DataError(TunerError):
    """A dataset is missing, unreadable or empty."""

    exit_code = BAD_INPUT


class Outage(TunerError):
    """What answers or judges cannot be used now — a model that cannot be loaded or reached, a system that cannot be
    reached: not the configuration's fault, so a study marks the trial interrupted and a resume runs it again."""


class LLMError(Outage):
    """A model cannot be loaded or reached."""


class MissingSecret(ConfigError, Outage):
    """The environment variable a config names for a token or key is unset: the user's to fix (exit 2), and when it
    goes missing mid-study the trial is marked interrupted, not failed (`env.secret` raises it)."""


class NewerRecord(DataError):
    """A record written by a newer tuner: not damage, so no older copy is put in its place."""


class Stopped(KeyboardInterrupt):
    """SIGTERM (`timeout`, systemd, `docker stop`, a CI runner's cancel) or SIGHUP (a closed ssh session): unwinds as
    Ctrl-C does — the running trial marked interrupted with the signal's name, the report written — and the process
    exits 128 + the signal's number."""

    def __init__(self, name: str, number: int):
        super().__init__(name)
        self.name = name
        self.exit_code = SIGNALLED + number


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
