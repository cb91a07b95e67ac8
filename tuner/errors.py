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
