"""Any OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio ...

The API key is read from the environment variable the config names, at call time, and is never stored.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

from tuner.env import secret
from tuner.errors import first_line
from tuner.models.llms._base import LLM, Completion, LLMError, Messages
from tuner.ui import Waiting

#: how often the client tries again after an outage-like failure, with its exponential backoff (0.5 s, 1 s, 2 s)
RETRIES = 3
#: seconds a server has to answer GET /models before the first call: one that answers nothing is hung
LIVENESS_SECONDS = 10.0
#: the longest Retry-After the openai client waits out; a server asking for more is not asked again
MOST_RETRY_AFTER = 120.0


class OpenAICompatibleLLM(LLM):
    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, timeout: float = 120):
        import openai

        self._openai = openai
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai-compatible:{self.base_url}:{model}"
        self.api_key_env = api_key_env
        self.timeout = timeout
        self._key()  # an unset variable is named now, not after the first trial's retrieval
        self._json_object_mode = False  # learnt on the first refusal of json_schema
        # the client retries what an outage looks like (connection errors, timeouts, 429, 5xx) with backoff;
        # re-asking for unparsable judge output is ours
        self._client = openai.OpenAI(base_url=self.base_url, api_key="not-needed", timeout=timeout,
                                     max_retries=RETRIES, http_client=openai.DefaultHttpxClient(
                                         transport=_whole_reply_deadline(timeout)))

    def _key(self) -> str:
        """The API key, read from the environment at each call (a rotated key is picked up); never stored."""
        if not self.api_key_env:
            return "not-needed"
        return secret(self.api_key_env, "api_key_env")

    def _chat(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int,
              json_schema: dict[str, Any] | None) -> Completion:
        with Waiting(f"the LLM endpoint {self.base_url}", self.timeout, RETRIES + 1):  # a hung call says so
            return self._completion(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                    json_schema=json_schema)

    def _completion(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int,
                    json_schema: dict[str, Any] | None) -> Completion:
        extra: dict[str, Any] = {}
        if json_schema is not None:
            extra["response_format"] = self._response_format(json_schema)
        if max_tokens == 1:
            extra.update(logprobs=True, top_logprobs=10)
        client = self._client.with_options(api_key=self._key())
        try:
            try:
                reply = client.chat.completions.create(model=self.model, messages=messages, max_tokens=max_tokens,
                                                       temperature=temperature, seed=seed, **extra)
            except self._openai.APIStatusError as exc:
                if json_schema is None or "response_format" not in str(exc.message) or self._json_object_mode:
                    raise
                # llama.cpp's server (and some others) take the schema inside json_object, not json_schema
                self._json_object_mode = True
                extra["response_format"] = self._response_format(json_schema)
                reply = client.chat.completions.create(model=self.model, messages=messages, max_tokens=max_tokens,
                                                       temperature=temperature, seed=seed, **extra)
        except self._openai.APITimeoutError:
            raise LLMError(f"the LLM endpoint {self.base_url} did not answer within {self.timeout:g} s "
                           f"({RETRIES + 1} tries; raise `timeout` in the config for a slow server)") from None
        except self._openai.APIConnectionError:
            raise LLMError(f"cannot reach the LLM endpoint {self.base_url} (is the server running?)") from None
        except self._openai.AuthenticationError:
            raise LLMError(f"{self.base_url} refused the API key (check the env var named by api_key_env)") from None
        except self._openai.NotFoundError:
            raise LLMError(f"{self.base_url} has no model {self.model!r}") from None
        except self._openai.APIStatusError as exc:
            wait = retry_after(exc.response.headers)
            if wait is not None and wait > MOST_RETRY_AFTER:  # the client gave up at once, as it should
                tries = f" and asked for a wait of {wait:g} s, beyond the {MOST_RETRY_AFTER:g} s tuner waits (1 try)"
            else:
                tries = f" ({RETRIES + 1} tries)" if exc.status_code >= 500 or exc.status_code == 429 else ""
            said = exc.body.get("message") if isinstance(exc.body, dict) else None  # the server's own words
            raise LLMError(f"{self.base_url} answered HTTP {exc.status_code}{tries}: "
                           f"{first_line(str(said or exc.message))}") from None
        except (self._openai.APIResponseValidationError, ValueError) as exc:  # ValueError: JSON cut short
            raise LLMError(f"{self.base_url} answered something that is not a chat completion "
                           f"({first_line(str(exc))})") from None
        if not getattr(reply, "choices", None):  # a non-JSON body comes back as text, not as an error
            raise LLMError(f"{self.base_url} answered something that is not a chat completion "
                           f"({first_line(str(reply))[:80]!r})")
        choice = reply.choices[0]
        top: dict[str, float] = {}
        if choice.logprobs and choice.logprobs.content:
            alternatives = getattr(choice.logprobs.content[0], "top_logprobs", None) or []
            # logprobs kept as given (yes_probability names one that is no number); an entry without a token is none
            top = {str(alt.token): getattr(alt, "logprob", None) for alt in alternatives
                   if getattr(alt, "token", None) is not None}
        usage = reply.usage
        prompt = usage.prompt_tokens if usage else 0
        # a server that keeps prompt prefixes says how many it resumed (OpenAI, vLLM, llama.cpp's server)
        resumed = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
        return Completion(choice.message.content or "", prompt, usage.completion_tokens if usage else 0, top,
                          evaluated_tokens=prompt - resumed if isinstance(resumed, int) and isinstance(prompt, int)
                          else None)

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        if self._json_object_mode:
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}

    def unreachable(self) -> str | None:
        """Nothing listens, or a server takes the connection and answers nothing (hung): each call would wait
        `timeout` four times over, minutes in silence. GET /models costs no token; any answer to it, an error
        included, is a server alive."""
        from tuner.models.registry import no_route

        why = no_route(self.base_url)
        if why:
            return f"cannot reach the LLM endpoint {self.base_url} ({why})"
        try:
            self._client.with_options(timeout=LIVENESS_SECONDS, max_retries=0).models.list()
        except self._openai.APITimeoutError:
            return (f"the LLM endpoint {self.base_url} took the connection but answered nothing within "
                    f"{LIVENESS_SECONDS:g} s (GET /models): is the server hung?")
        except Exception:
            pass
        return None

    def close(self) -> None:
        self._client.close()


def _whole_reply_deadline(seconds: float) -> Any:
    """An httpx transport whose replies must arrive whole within `seconds` of the request: httpx's timeout bounds
    each read, so a server sending a byte now and then would hold a call for ever. Past it, httpx's ReadTimeout,
    which the client retries and then reports as a timeout. httpx as the openai client uses it: its releases moved
    from `httpx` to `httpx2`, whose classes are not httpx's."""
    import importlib

    import openai

    client = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    httpx = importlib.import_module(client.__module__.split(".")[0])

    class Within(httpx.SyncByteStream):
        def __init__(self, stream: Any, deadline: float):
            self.stream, self.deadline = stream, deadline

        def __iter__(self) -> Any:
            for part in self.stream:
                if time.monotonic() > self.deadline:
                    raise httpx.ReadTimeout(f"the reply took longer than {seconds:g} s")
                yield part

        def close(self) -> None:
            self.stream.close()

    class Transport(httpx.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            deadline = time.monotonic() + seconds
            response = super().handle_request(request)
            response.stream = Within(response.stream, deadline)
            return response

    return Transport()


def retry_after(headers) -> float | None:
    """The seconds a refusal asks the client to wait (Retry-After as seconds or an HTTP date, or retry-after-ms);
    None when it names none."""
    try:
        return float(headers.get("retry-after-ms")) / 1000
    except (TypeError, ValueError):
        pass
    said = headers.get("retry-after")
    try:
        return float(said)
    except (TypeError, ValueError):
        pass
    try:
        return email.utils.mktime_tz(email.utils.parsedate_tz(said)) - time.time()
    except (TypeError, ValueError, OverflowError):
        return None

