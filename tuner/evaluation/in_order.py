"""A few items worked on at once, their results handed on one by one in the items' order.

An endpoint can answer many calls at once; a study still wants its questions recorded, shown to the pruner and
journaled in order, so that pruning and resuming behave as if they had been answered one after another. The
threads are daemons: an interrupted run (Ctrl-C, SIGTERM) unwinds without waiting for calls in flight, which go on
while tuner writes its report; `settle` then gives them until the process leaves, so that a reply that arrives
meanwhile reaches the cache instead of being paid for again on resume.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

#: work items running on worker threads, in this process: the ones a stop left behind are what `settle` waits for
_running = [0]
_changed = threading.Condition()


def settle(deadline: float) -> int:
    """Wait until no work item runs, or the monotonic `deadline`; the number still running."""
    with _changed:
        while _running[0] and (left := deadline - time.monotonic()) > 0:
            _changed.wait(left)
        return _running[0]


def in_order(work: Callable[[int, Item], Result], items: Sequence[Item], width: int,
             on_result: Callable[[int, Result], None] | None = None) -> list[Result]:
    """`work(index, item)` for every item, up to `width` at once, each result handed to `on_result` in item order
    (the next items are already under way while it runs). An exception from `work` is raised when its item's turn
    comes; one from `on_result` (a pruned trial) stops the launching and is raised once the items in flight have
    finished, so that their paid calls reach the cache and none runs on into the next evaluation. An interruption
    (KeyboardInterrupt, a spent budget: not an Exception) does not wait. `width` 1 works in the calling thread."""
    if width <= 1:
        results = []
        for index, item in enumerate(items):
            results.append(work(index, item))
            if on_result:
                on_result(index, results[-1])
        return results

    finished: dict[int, tuple[bool, Any]] = {}
    changed = threading.Condition()
    launched = handed = 0

    def run(index: int, item: Item) -> None:
        try:
            outcome = (True, work(index, item))
        except BaseException as exc:  # handed to the caller's thread, in its turn
            outcome = (False, exc)
        with changed:
            finished[index] = outcome
            changed.notify_all()
        with _changed:
            _running[0] -= 1
            _changed.notify_all()

    def launch() -> None:
        nonlocal launched
        while launched < len(items) and launched - handed < width:
            with _changed:
                _running[0] += 1
            threading.Thread(target=run, args=(launched, items[launched]), daemon=True,
                             name=f"in-order-{launched}").start()
            launched += 1

    results: list[Result] = []
    try:
        launch()
        while handed < len(items):
            with changed:
                while handed not in finished:
                    changed.wait(timeout=1.0)  # a timeout keeps the wait open to signals
                ok, value = finished.pop(handed)
            handed += 1
            if not ok:
                raise value
            results.append(value)
            launch()
            if on_result:
                on_result(handed - 1, value)
    except Exception:
        with changed:  # the items in flight finish: their calls are paid for, so they are cached
            while handed + len(finished) < launched:
                changed.wait(timeout=1.0)
        raise
    return results
