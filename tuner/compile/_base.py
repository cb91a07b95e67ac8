"""The contract every prompt optimizer follows, and the registry of them.

One signature for all, as DSPy's own optimizers share `compile(student, trainset=...)`: a compiler is made with
the budget it may spend and compiles a program against a metric. Each implementation sizes its optimizer to the
budget; the cost meter's hard limit (`BudgetSpent`) backs the estimate up.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import dspy

from tuner.compile.metric import CompileMetric
from tuner.prompts.programs import RAGAnswer


class ProgramCompiler(ABC):
    name: ClassVar[str]

    def __init__(self, budget: int, calls_per_score: int, seed: int = 0):
        """`budget`: LLM calls the compile may pay; `calls_per_score`: what answering and judging one example
        costs, roughly (it sizes the search to the budget)."""
        self.budget = budget
        self.calls_per_score = max(1, calls_per_score)
        self.seed = seed

    def scores_affordable(self, reserved: float = 0.0) -> int:
        """How many examples the budget can answer and judge, `reserved` of it kept for other calls."""
        return int(self.budget * (1 - reserved)) // self.calls_per_score

    @abstractmethod
    def compile(self, program: RAGAnswer, trainset: list[dspy.Example], metric: CompileMetric) -> RAGAnswer:
        """A new program tuned on `trainset`; `program` itself is left as it was."""
