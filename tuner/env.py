"""Environment defaults that must be in place before heavy libraries are imported, and the cores tuner may use.

The machines tuner runs on often have no internet: every library that would phone home
(Hugging Face hub, RAGAS telemetry, LiteLLM's cost map) is told to stay local. A user's own
setting always wins (setdefault).
"""

import os

OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "RAGAS_DO_NOT_TRACK": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",  # no weight-loading progress bars in our output
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HAYSTACK_TELEMETRY_ENABLED": "False",  # a Haystack pipeline a user tunes would report its runs
}


#: the defaults tuner set itself (a user's own setting is not among them): an explicit download may lift these
SET_HERE: set[str] = set()


def set_offline_defaults() -> None:
    for key, value in OFFLINE_DEFAULTS.items():
        if key not in os.environ:
            os.environ[key] = value
            SET_HERE.add(key)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's cpuset, `taskset`, a pinned test worker),
    not every core of the machine, which would oversubscribe them."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on macOS or Windows
        return os.cpu_count() or 1


def secret(name: str, setting: str, optional: bool = False) -> str | None:
    """A token or API key from environment variable `name` (what the config's `setting` names), read each time it is
    needed (a rotated key is picked up) and never stored; unset: one line naming both (None when `optional`)."""
    value = os.environ.get(name)
    if not value and not optional:
        from tuner.errors import MissingSecret

        raise MissingSecret(f"environment variable {name} ({setting}) is not set")
    return value or None
