"""The user's own RAG system as what a study tunes, in place of tuner's built-in pipeline (`system:` in the
project config). Kinds: a Python function (`_python.py`), an HTTP endpoint (`_http.py`), both behind the contract in
`_base.py`; `adapters.py` turns LangChain and LlamaIndex objects into the Python kind and serves any Python system
over HTTP. `AskedSystem` is what a run talks to: every reply checked, cached and counted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.cache import KeyValue, paid_once
from tuner.config import SystemConfig
from tuner.cost import CostMeter
from tuner.systems._base import BadReply, BadShape, Context, Rejected, Reply, System, Unreachable

__all__ = ["AskedSystem", "BadReply", "BadShape", "Context", "Rejected", "Reply", "System", "Unreachable",
           "make_system"]


def make_system(config: SystemConfig) -> System:
    """The system `config` names (the `System` its kind's config class names), its entry point imported (or its
    URL's token read) now: a bad one is one line before any trial."""
    return config.implemented()


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
        key = ["system", self.name, question_id, text, dict(sorted(params.items()))]
        return paid_once(self.cache, self.meter, key, self.name,
                         lambda: Reply.parse(self.inner.ask({"id": question_id, "text": text}, params),
                                             self.config.answers),
                         lambda reply: {"reply": reply.to_json()}, lambda hit: Reply.parse(hit["reply"], answers=False),
                         paid_if=(BadReply,))  # a reply that was no reply was asked and paid for: nothing to keep

    def unreachable(self) -> str | None:
        return self.inner.unreachable()

    def close(self) -> None:
        self.inner.close()
