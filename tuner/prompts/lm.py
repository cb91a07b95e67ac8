"""DSPy's view of a tuner LLM: a custom engine, so DSPy's calls go through our cache and cost meter.

Both backends (llama.cpp in process, OpenAI-compatible endpoints) reach DSPy this way: one cache, one
accounting, one place that turns DSPy's JSON requests into grammar-constrained output.
"""

from __future__ import annotations

from typing import Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from tuner.models.llms import LLM


class TunerEngine:
    def __init__(self, llm: LLM, max_tokens: int):
        self.llm = llm
        self.max_tokens = max_tokens

    def complete(self, request) -> Response:
        messages: list[dict[str, str]] = []
        if request.system is not None:
            system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
            messages.append({"role": "system", "content": system})
        messages.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
        config = request.config
        completion = self.llm.chat(
            messages,
            max_tokens=config.max_tokens or self.max_tokens,
            temperature=config.temperature or 0.0,
            seed=getattr(config, "seed", None) or 0,
            json_schema=_schema_of(config.response_format),
        )
        return Response(id=None, model=self.llm.name, message=Message.assistant([TextPart(completion.text)]),
                        finish_reason="stop",
                        usage=Usage(input_tokens=completion.prompt_tokens, output_tokens=completion.completion_tokens))

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    if not response_format:
        return None
    fmt = dict(response_format)
    if fmt.get("type") == "json_schema":
        return dict(fmt.get("json_schema", {}).get("schema") or {"type": "object"})
    return {"type": "object"}


def dspy_lm(llm: LLM, max_tokens: int) -> dspy.LM:
    # DSPy's own cache stays off: tuner's disk cache already keys every call
    return dspy.LM(f"tuner/{llm.name}", engine=TunerEngine(llm, max_tokens), cache=False, temperature=0.0,
                   max_tokens=max_tokens, num_retries=0)
