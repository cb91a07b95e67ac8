"""Cost accounting: LLM calls, tokens, wall seconds and cache hits, per question and per stage.

The LLM cache reports every call to the meter; the evaluator names the stage (generate, rerank, a metric)
and the question being worked on, so costs land where they were spent. Lives below models/ because the
cached LLM reports to it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields


@dataclass
class Cost:
    llm_calls: int = 0  # calls that reached a model (cache misses)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    cached_tokens: int = 0  # prompt + completion tokens of the calls the cache answered (what it saved)
    model_seconds: float = 0.0  # of `seconds`, the time spent inside model calls
    #: model seconds of the calls the cache answered, as measured when they were paid: a configuration's time does
    #: not depend on whether another trial paid its calls first
    saved_seconds: float = 0.0
    unmetered_hits: int = 0  # cache hits stored before their seconds were (their time is unknown)
    #: of the paid calls' prompt tokens, those the models computed; the rest resumed a prefix a model kept (a model
    #: that does not say counts them all)
    evaluated_tokens: int = 0

    def add(self, other: Cost) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    # as on a cold cache: a call the cache answered counts at what it cost when it was paid
    @property
    def cold_calls(self) -> int:
        return self.llm_calls + self.cache_hits

    @property
    def cold_tokens(self) -> int:
        return self.tokens + self.cached_tokens

    @property
    def cold_seconds(self) -> float:
        return self.seconds + self.saved_seconds

    @property
    def evaluated_of_sent(self) -> str:
        """Prompt tokens the models computed of those the paid calls sent, as `evaluated/sent`; `?` for a record from
        before tuner counted them (a paid call computes one token at least)."""
        if not self.prompt_tokens:
            return "0"
        return f"{self.evaluated_tokens:,}/{self.prompt_tokens:,}" if self.evaluated_tokens else \
            f"?/{self.prompt_tokens:,}"

    def as_dict(self) -> dict[str, float | int]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        data["model_seconds"] = round(self.model_seconds, 3)
        data["saved_seconds"] = round(self.saved_seconds, 3)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, float | int]) -> Cost:
        """Tolerant of files written before a field existed (it reads as 0)."""
        return cls(**{f.name: data.get(f.name, 0) for f in fields(cls)})


class BudgetSpent(BaseException):
    """The meter's call budget is spent. A BaseException, like KeyboardInterrupt, so that no library's catch-all
    (DSPy's optimizers count exceptions as failed examples) can turn it into a bad score and go on paying."""


#: the question this thread works on, whichever meter counts it: a model keeps its prompts' states per question
_working_on = threading.local()


def current_question() -> str:
    """The id of the question this thread's calls are for ("" outside a question's stage)."""
    return getattr(_working_on, "question", "")


@dataclass
class CostMeter:
    #: (question id, stage) -> cost
    records: dict[tuple[str, str], Cost] = field(default_factory=dict)
    #: paid calls (cache misses) allowed from now on; None: no limit
    budget: int | None = None
    #: each thread's current (question id, stage): questions evaluated at once each attribute their own calls
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: set by a stop (Ctrl-C, SIGTERM): calls in flight finish and are cached, no new one is paid for
    stopping: bool = False
    _paid: int = 0
    _made: int = 0

    @property
    def _where(self) -> tuple[str, str]:
        return getattr(self._local, "where", ("", "other"))

    def before_paid_call(self) -> None:
        """Called before a call that reaches a model: raises BudgetSpent once the budget is used up, or after a stop
        (a question still in flight must not begin its next paid call while tuner leaves)."""
        if self.stopping:
            raise BudgetSpent("stopping: no new LLM call after a stop")
        if self.budget is not None and self._paid >= self.budget:
            raise BudgetSpent(f"the budget of {self.budget} LLM calls is spent")

    @property
    def paid(self) -> int:
        """Calls that reached a model since the meter was made (records may be cleared; this is not)."""
        return self._paid

    @property
    def made(self) -> int:
        """Calls made since the meter was made, paid or answered by the cache: their cost on a cold cache."""
        return self._made

    @contextmanager
    def stage(self, question_id: str, stage: str) -> Iterator[Cost]:
        """Attribute calls made inside the block to (question, stage) and time it."""
        previous, self._local.where = self._where, (question_id, stage)
        asked, _working_on.question = current_question(), question_id
        cost = self.records.setdefault((question_id, stage), Cost())
        started = time.perf_counter()
        try:
            yield cost
        finally:
            cost.seconds += time.perf_counter() - started
            self._local.where, _working_on.question = previous, asked

    def record_call(self, prompt_tokens: int, completion_tokens: int, cache_hit: bool,
                    seconds: float | None = 0.0, evaluated_tokens: int | None = None) -> None:
        """`seconds`: the model time of a paid call; of a cache hit, what the call took when it was paid (None:
        unknown, an entry from before tuner stored it). `evaluated_tokens`: of a paid call's prompt tokens, those
        the model computed (None: all of them, as far as anyone can tell)."""
        cost = self.records.setdefault(self._where, Cost())
        with self._lock:
            self._made += 1
            self._paid += not cache_hit
        if cache_hit:
            cost.cache_hits += 1
            cost.cached_tokens += prompt_tokens + completion_tokens
            if seconds is None:
                cost.unmetered_hits += 1
            else:
                cost.saved_seconds += seconds
        else:
            cost.llm_calls += 1
            cost.model_seconds += seconds
            cost.prompt_tokens += prompt_tokens
            cost.completion_tokens += completion_tokens
            cost.evaluated_tokens += prompt_tokens if evaluated_tokens is None else evaluated_tokens

    def total(self, question_id: str | None = None, stage: str | None = None) -> Cost:
        total = Cost()
        for (qid, name), cost in self.records.items():
            if (question_id is None or qid == question_id) and (stage is None or name == stage):
                total.add(cost)
        return total

    def by_stage(self, question_id: str | None = None) -> dict[str, Cost]:
        stages = sorted({name for qid, name in self.records if question_id is None or qid == question_id})
        return {name: self.total(question_id, name) for name in stages}
