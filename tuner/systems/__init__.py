"""The user's own RAG system as what a study tunes, in place of tuner's built-in pipeline (`system:` in the
project config). Kinds: a Python function (`_python.py`), an HTTP endpoint (`_http.py`), both behind the contract in
`_base.py`; `adapters.py` turns LangChain and LlamaIndex objects into the Python kind and serves any Python system
over HTTP. `AskedSystem` is what a run talks to: every reply checked, cached and counted."""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from typing import Any

from tuner.cache import KeyValue, stable_hash
from tuner.config import SystemConfig
from tuner.cost import CostMeter
from tuner.systems._base import BadReply, Context, Rejected, Reply, System, Unreachable

__all__ = ["AskedSystem", "BadReply", "Context", "Rejected", "Reply", "System", "Unreachable", "make_system"]


def make_system(config: SystemConfig) -> System:
    """The system `config` names (the `System` its kind's config class names), its entry point imported (or its
    URL's token read) now: a bad one is one line before any trial."""
    module, _, name = config.implementation.partition(":")
    return getattr(importlib.import_module(module), name)(config)


class AskedSystem:
    """A system as a run asks it: each reply checked (`Reply.parse`), cached under the system's identity, the
    question and the knobs, and counted by the run's meter (a call, its latency, the tokens it reports). A cached
    reply keeps the seconds it took, so latency targets read the same on a resume."""

    def __init__(self, config: SystemConfig, inner: System, cache: KeyValue | None, meter: CostMeter):
        self.config = config
        self.inner = inner
        self.name = config.identity
        self.cache = cache  # None: every question reaches the system (benchmarks' naive mode)
        self.meter = meter

    def reply(self, question_id: str, text: str, params: Mapping[str, Any]) -> Reply:
        asked = {"id": question_id, "text": text}
        if self.cache is None:
            return self._pay(asked, params)[0]
        key = stable_hash(["system", self.name, question_id, text, dict(sorted(params.items()))])
        if (hit := self.cache.get(key)) is not None:
            return self._hit(hit)
        with self.cache.lease(key) as hit:  # another worker may be asking this very question: wait for its reply
            if hit is not None:
                return self._hit(hit)
            reply, seconds = self._pay(asked, params)
            self.cache.put(key, {"reply": reply.to_json(), "seconds": round(seconds, 4)}, tag=self.name)
            return reply

    def _hit(self, hit: Mapping[str, Any]) -> Reply:
        reply = Reply.parse(hit["reply"], answers=False)
        self.meter.record_call(reply.prompt_tokens, reply.completion_tokens, cache_hit=True,
                               seconds=hit.get("seconds"))
        return reply

    def _pay(self, asked: dict[str, str], params: Mapping[str, Any]) -> tuple[Reply, float]:
        self.meter.before_paid_call()  # after a stop, no question begins
        started = time.perf_counter()
        try:
            reply = Reply.parse(self.inner.ask(asked, params), self.config.answers)
        except BadReply:  # asked and paid for, but nothing to keep
            self.meter.record_call(0, 0, cache_hit=False, seconds=time.perf_counter() - started)
            raise
        seconds = time.perf_counter() - started
        self.meter.record_call(reply.prompt_tokens, reply.completion_tokens, cache_hit=False, seconds=seconds)
        return reply, seconds

    def unreachable(self) -> str | None:
        return self.inner.unreachable()

    def close(self) -> None:
        self.inner.close()
