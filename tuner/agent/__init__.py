"""The agent: rounds of optimise → analyse → next search space, logged as a journey a person reads."""

from tuner.agent.rounds import RoundOutcome, run_rounds

__all__ = ["RoundOutcome", "run_rounds"]
