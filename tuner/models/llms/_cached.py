"""The one place LLM calls are cached and counted: wraps any backend, is itself an LLM."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from tuner.cache import KeyValue, paid_once
from tuner.cost import CostMeter
from tuner.models.llms._base import LLM, NO_LOGPROBS, Completion, Messages


class CachedLLM(LLM):
    def __init__(self, inner: LLM, cache: KeyValue | None, meter: CostMeter):
        self.inner = inner
        self.name = inner.name
        self.cache = cache  # None: every call reaches the model (benchmarks' naive mode)
        self.meter = meter
        #: why yes-probabilities were read off sampled text (Completion.from_text), each with its count
        self.read_off_text: Counter[str] = Counter()

    @property
    def context_window(self) -> int | None:
        return self.inner.context_window

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def unreachable(self) -> str | None:
        return self.inner.unreachable()

    def _chat(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int,
              json_schema: dict[str, Any] | None) -> Completion:
        key = ["chat", self.name, messages, max_tokens, temperature, seed, json_schema]
        return self._through_cache(key, lambda: self.inner.chat(
            messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_schema=json_schema))

    def close(self) -> None:
        self.inner.close()

    def yes_probability(self, messages: Messages, reuse_prefix: bool = False) -> Completion:
        # one key either way: a resumed prefix changes the float rounding, not what is asked
        completion = self._through_cache(["yes", self.name, messages],
                                         lambda: self.inner.yes_probability(messages, reuse_prefix))
        if completion.from_text:
            self.read_off_text[completion.from_text] += 1
        return completion

    @property
    def why_read_off_text(self) -> str:
        """The most frequent reason yes-probabilities were read off sampled text so far; "" when none was."""
        return self.read_off_text.most_common(1)[0][0] if self.read_off_text else ""

    def _through_cache(self, key: list[Any], call: Callable[[], Completion]) -> Completion:
        return paid_once(self.cache, self.meter, key, self.name, call, _stored, _loaded)


def _stored(completion: Completion) -> dict[str, Any]:
    return {"text": completion.text, "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            **({"from_text": completion.from_text} if completion.from_text else {})}


def _loaded(hit: dict[str, Any]) -> Completion:
    from_text = hit.get("from_text") or ""
    return Completion(hit["text"], hit["prompt_tokens"], hit["completion_tokens"],
                      from_text=NO_LOGPROBS if from_text is True else from_text)  # True: stored before the why
