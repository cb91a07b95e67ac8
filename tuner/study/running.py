"""The trials this process is running, for the one exit that cannot unwind.

Ctrl-C normally unwinds as a KeyboardInterrupt and the objective marks its trial interrupted. When the interrupt
is stuck in a model's native code, the CLI's watcher leaves with os._exit instead; just before, it marks the trials
listed here interrupted through their storage (thread-safe in Optuna), so the study says "interrupted", not
"running", and a resume runs them again. Kept free of heavy imports: the CLI reads it before any study exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_trials: list[Any] = []  # optuna.Trial objects


@contextmanager
def running(trial: Any) -> Iterator[None]:
    _trials.append(trial)
    try:
        yield
    finally:
        _trials.remove(trial)


def any_running() -> bool:
    return bool(_trials)


def mark_interrupted(reason: str = "Ctrl-C") -> None:
    """Fail every running trial with the interrupted mark; a trial its own thread finished meanwhile is left be."""
    if not _trials:
        return
    from optuna.trial import TrialState

    from tuner.study.attrs import INTERRUPTED

    for trial in list(_trials):
        storage, trial_id = trial.study._storage, trial._trial_id
        try:
            storage.set_trial_user_attr(trial_id, INTERRUPTED, reason)
            storage.set_trial_state_values(trial_id, TrialState.FAIL)
        except Exception:  # already finished (UpdateFinishedTrialError) or storage gone: leave it
            pass
