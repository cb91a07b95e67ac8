"""The user's own RAG system as what a study tunes, in place of tuner's built-in pipeline (`system:` in the
project config). Kinds: a Python function (`_python.py`), an HTTP endpoint (`_http.py`), both behind the contract in
`_base.py`; `adapters.py` turns LangChain and LlamaIndex objects into the Python kind and serves any Python system
over HTTP. `AskedSystem` is what a run talks to: every reply checked, cached and counted."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tuner.cache import KeyValue, paid_once
from tuner.config import SystemConfig
from tuner.cost import CostMeter
from tuner.systems._base import BadReply, BadShape, Context, Rejected, Reply, System, Unreachable
from tuner.ui import knobs

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
        #: failures kept by `reply(keep_failure=True)`, by call: the next ask of the same call gets it unasked
        self._failed: dict[str, BadReply | Rejected] = {}

    def reply(self, question_id: str, text: str, params: Mapping[str, Any], keep_failure: bool = False) -> Reply:
        """The checked reply. `keep_failure`: a call that fails (no reply, knobs refused) is not cached, so the
        check before trial 0 keeps its failure here for trial 0's same call, which then fails without asking (and
        waiting out its tries) again."""
        key = ["system", self.name, question_id, text, dict(sorted(params.items()))]
        said = json.dumps(key, sort_keys=True, default=str)
        if said in self._failed:
            raise self._failed[said] if keep_failure else self._failed.pop(said)
        try:
            return paid_once(self.cache, self.meter, key, self.name,
                             lambda: Reply.parse(self.inner.ask({"id": question_id, "text": text}, params),
                                                 self.config.answers),
                             lambda reply: {"reply": reply.to_json()},
                             lambda hit: Reply.parse(hit["reply"], answers=False),
                             paid_if=(BadReply,))  # a reply that was no reply was asked and paid for: nothing to keep
        except Rejected as exc:  # said as the system's refusal, whoever raised it, not as tuner's own words
            refused = Rejected(f"system {self.config.entry} refused the knobs {knobs(params) or '(none)'}: {exc}")
            if keep_failure:
                self._failed[said] = refused
            raise refused from None
        except BadReply as exc:
            if keep_failure:
                self._failed[said] = exc
            raise

    def unreachable(self) -> str | None:
        return self.inner.unreachable()

    def close(self) -> None:
        self.inner.close()
