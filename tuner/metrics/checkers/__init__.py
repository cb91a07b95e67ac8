"""What reads whether passages support a claim: P(supported) per claim, behind one contract (`Checker`). Graded
verdicts of faithfulness and context recall ask it for every statement (`metrics/graded.py`).

Its kinds: the judge's own P(yes) under the verdict settings (`graded.JudgeVerdicts`, what `evaluation.checker:
none` means), and the kinds a config names (`config.CHECKER_KINDS`), each a class here built from its config class
(`_Kinded.implemented`). A new kind is a class here, a config class and a `CHECKER_KINDS` entry; the contract cases
in tests/test_checkers.py run against it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from tuner.cost import CostMeter


class Checker(ABC):
    """Reads, per claim, the probability that a question's passages support it."""

    #: the judge's cache and meter (`make_checker` sets them): a kind that runs a model reads its calls through them
    #: and counts them, as LLM calls are (`cache.paid_once`); None: every call is paid, counted by no one
    cache: Any = None
    meter: Any = None

    @property
    @abstractmethod
    def name(self) -> str:
        """What checks, as results record it (`lexical:words`, or the judge's cache name)."""

    @abstractmethod
    def supported(self, contexts: Sequence[str], statements: Sequence[str]) -> list[float]:
        """P(the passages support it) in [0, 1], one per statement, in order. A statement that states no fact is
        supported: people do not call it a hallucination."""


def make_checker(config: Any, cache: Any = None, meter: Any = None) -> Checker:
    """The checker a config of one of `CHECKER_KINDS` names, reading through the judge's `cache` and `meter` (a
    meter of its own when the judge has none: its counts are then seen by nobody, but kept in one place)."""
    checker = config.implemented()
    checker.cache, checker.meter = cache, meter if meter is not None else CostMeter()
    return checker
