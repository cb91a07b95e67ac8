"""The trials this process is running, for the one exit that cannot unwind.

Ctrl-C normally unwinds as a KeyboardInterrupt and the objective marks its trial interrupted. When the interrupt
is stuck in a model's native code, the CLI's watcher leaves with os._exit instead; just before, it marks the trials
listed here interrupted through their storage (thread-safe in Optuna), so the study says "interrupted", not
"running", and a resume runs them again. The two may meet: the native call returns just as the watcher gives up
waiting. One lock decides which of them marks a trial; the other leaves it be (a trial Optuna is told about twice
fails with a traceback). Kept free of heavy imports: the CLI reads it before any study exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: the running optuna.Trial objects, each with what it has paid so far (a Cost.as_dict, or None)
_trials: dict[Any, Callable[[], dict | None]] = {}
_lock = threading.Lock()
_leaving = threading.Event()  # the watcher marked the trials and the process is about to exit


@contextmanager
def running(trial: Any, spent: Callable[[], dict | None] = lambda: None) -> Iterator[None]:
    """Around a trial's objective; `spent()` says what it has paid so far, kept when the watcher marks it."""
    _trials[trial] = spent
    try:
        yield
    finally:
        with _lock:
            marked = _leaving.is_set() and trial in _trials  # the watcher marks every trial still listed
            _trials.pop(trial, None)
        if marked:  # the native call returned too late: the trial is marked interrupted, its result never told
            threading.Event().wait()  # os._exit from the watcher ends this


def any_running() -> bool:
    return bool(_trials)


def unwinding(trial: Any, reason: str) -> None:
    """The objective's own unwinding marks its trial interrupted; from then on the watcher leaves it to Optuna. If
    the watcher marked it first, the process is exiting from the watcher's thread: this one waits for that, since
    going on would tell Optuna about a finished trial."""
    from tuner.study.attrs import INTERRUPTED

    with _lock:
        if not _leaving.is_set():
            _trials.pop(trial, None)
            trial.set_user_attr(INTERRUPTED, reason)
            return
    threading.Event().wait()  # os._exit from the watcher ends this


def mark_interrupted(reason: str = "Ctrl-C") -> None:
    """Fail every running trial with the interrupted mark; a trial its own thread finished meanwhile is left be.
    Only the watcher calls this, just before os._exit."""
    from optuna.trial import TrialState

    from tuner.study.attrs import COST, INTERRUPTED

    with _lock:
        _leaving.set()
        for trial, spent in list(_trials.items()):
            # private (trial.study._storage, trial._trial_id): the watcher ends the trial of a thread that cannot
            # unwind (stuck in native code); a public Trial has no way to mark itself from another thread. If these
            # move, tests/test_faults_signals.py's forced exits fail here
            storage, trial_id = trial.study._storage, trial._trial_id
            try:
                paid = spent()
                if paid is not None:  # the report counts its calls and seconds (attrs.spent reads it)
                    storage.set_trial_user_attr(trial_id, COST, paid)
                storage.set_trial_user_attr(trial_id, INTERRUPTED, reason)
                storage.set_trial_state_values(trial_id, TrialState.FAIL)
            except Exception:  # already finished (UpdateFinishedTrialError) or storage gone: leave it
                pass
