"""Any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio ...

The API key is read from the environment variable the config names, at call time, and is never stored.
"""

from __future__ import annotations

import os
from typing import Any

from tuner.models.llms._base import LLM, Completion, LLMError, Messages


class OpenAICompatibleLLM(LLM):
    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, timeout: float = 120):
        import openai

        if api_key_env and not os.environ.get(api_key_env):
            raise LLMError(f"environment variable {api_key_env} (api_key_env) is not set")
        self._openai = openai
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai-compatible:{self.base_url}:{model}"
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        # retries are ours (judge re-asks); the client only waits out one request
        self._json_object_mode = False  # learnt on the first refusal of json_schema
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key or "not-needed", timeout=timeout,
                                     max_retries=1)

    def _chat(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int,
              json_schema: dict[str, Any] | None) -> Completion:
        extra: dict[str, Any] = {}
        if json_schema is not None:
            extra["response_format"] = self._response_format(json_schema)
        if max_tokens == 1:
            extra.update(logprobs=True, top_logprobs=10)
        try:
            try:
                reply = self._client.chat.completions.create(model=self.model, messages=messages,
                                                             max_tokens=max_tokens, temperature=temperature,
                                                             seed=seed, **extra)
            except self._openai.APIStatusError as exc:
                if json_schema is None or "response_format" not in str(exc.message) or self._json_object_mode:
                    raise
                # llama.cpp's server (and some others) take the schema inside json_object, not json_schema
                self._json_object_mode = True
                extra["response_format"] = self._response_format(json_schema)
                reply = self._client.chat.completions.create(model=self.model, messages=messages,
                                                             max_tokens=max_tokens, temperature=temperature,
                                                             seed=seed, **extra)
        except self._openai.APIConnectionError:
            raise LLMError(f"cannot reach the LLM endpoint {self.base_url} (is the server running?)") from None
        except self._openai.AuthenticationError:
            raise LLMError(f"{self.base_url} refused the API key (check the env var named by api_key_env)") from None
        except self._openai.NotFoundError:
            raise LLMError(f"{self.base_url} has no model {self.model!r}") from None
        except self._openai.APIStatusError as exc:
            raise LLMError(f"{self.base_url} answered HTTP {exc.status_code}: {_first_line(exc.message)}") from None
        choice = reply.choices[0]
        top: dict[str, float] = {}
        if choice.logprobs and choice.logprobs.content:
            top = {alt.token: alt.logprob for alt in choice.logprobs.content[0].top_logprobs or []}
        usage = reply.usage
        return Completion(choice.message.content or "", usage.prompt_tokens if usage else 0,
                          usage.completion_tokens if usage else 0, top)

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self._json_object_mode:
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}

    def close(self) -> None:
        self._client.close()


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if text and text.strip() else "(no message)"
