"""A system behind an HTTP endpoint: each question POSTed as JSON, the reply read as JSON.

Retries what an outage looks like, as the OpenAI-compatible LLM backend does: a refused connection, a timeout, 429
(waiting out its Retry-After, up to the same cap) and 5xx, with exponential backoff (0.5 s, 1 s, 2 s). A 502, 503 or
504 that outlasts the retries is an outage (the study stops, the trial runs again on resume); a 500 is the system's
own error on that question. `timeout` bounds the whole reply, not each read: a reply that trickles in never ends.
A redirect is not followed (urllib would turn the POST into a GET): its target is named. A bearer token is read
from the environment variable `api_key_env` names, at call time, and never stored.
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Mapping
from typing import Any

from tuner.config import PLACEHOLDER, HttpResponsePaths, HttpSystemConfig
from tuner.env import secret
from tuner.errors import first_line
from tuner.models.llms._openai import MOST_RETRY_AFTER, RETRIES, retry_after
from tuner.systems._base import BadReply, BadShape, Rejected, System, Unreachable
from tuner.ui import Waiting

#: the first backoff; each retry waits twice the one before
BACKOFF = 0.5
#: what a gateway or a server says while it is down or restarting: an outage, not the configuration's failure
OUTAGE = (502, 503, 504)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect comes back as the HTTPError it is: urllib would re-send the POST as a GET without its body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def decoded(data: bytes, encoding: str | None) -> bytes:
    """The body as sent before its Content-Encoding (gzip, deflate; urllib decodes none); BadShape naming an
    encoding tuner cannot read, rather than its bytes shown as a reply that is not JSON."""
    encoding = (encoding or "identity").strip().lower()
    try:
        if encoding in ("gzip", "x-gzip"):
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data, -zlib.MAX_WBITS if data[:1] != b"x" else zlib.MAX_WBITS)
    except (OSError, EOFError, zlib.error) as exc:
        raise BadShape(f"the reply says it is {encoding}-encoded but does not decode ({first_line(exc)})") from None
    if encoding != "identity":
        raise BadShape(f"the reply is {encoding}-encoded, which tuner does not read: serve it plain, gzip or "
                       f"deflate")
    return data


def read_within(response: Any, deadline: float, timeout: float) -> bytes:
    """The whole body, or TimeoutError once `deadline` (monotonic) passes: one read at a time, each given only the
    time left, so a server sending a byte now and then cannot hold the call past it."""
    parts = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the reply took longer than {timeout:g} s")
        sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
        if sock is not None:  # private (http.client's socket file): without it each read waits `timeout` at most
            sock.settimeout(left)
        part = response.read1(65536)
        if not part:
            return b"".join(parts)
        parts.append(part)


class HttpSystem(System):
    def __init__(self, config: HttpSystemConfig):
        self.url = self.name = config.http
        self.timeout = config.timeout
        self.api_key_env = config.api_key_env
        self.config = config
        self._headers()  # an unset variable is named now, not at the first question

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {secret(self.api_key_env, 'system.api_key_env')}"
        for name, value in self.config.headers.items():  # read when sent: a secret is never kept
            headers[name] = _ENV.sub(lambda m: secret(m.group(1), f"system.headers.{name}"), value)
        return headers

    def _request(self, question: Mapping[str, str], params: Mapping[str, Any]) -> tuple[str, bytes | None]:
        """The URL and body a question is sent with: tuner's JSON, or the service's own shape (`request`)."""
        if self.config.request is None:
            return self.url, json.dumps({"question": dict(question), "params": dict(params)}).encode()
        # a knob the caller leaves out is sent at its declared default, as a study sends it
        values = {"question": question["text"], "question_id": question["id"],
                  **{name: knob.default for name, knob in self.config.knobs.items()}, **params}
        filled = _fill(self.config.request, values)
        if self.config.method == "GET":
            query = urllib.parse.urlencode({k: v if isinstance(v, str) else json.dumps(v) for k, v in filled.items()})
            return f"{self.url}{'&' if '?' in self.url else '?'}{query}", None
        return self.url, json.dumps(filled).encode()

    def ask(self, question: Mapping[str, str], params: Mapping[str, Any]) -> Any:
        with Waiting(f"the system at {self.url}", self.timeout, RETRIES + 1) as waiting:  # a hung call says so
            return self._ask(question, params, waiting)

    def _ask(self, question: Mapping[str, str], params: Mapping[str, Any], waiting: Waiting) -> Any:
        url, body = self._request(question, params)
        wait, tries = BACKOFF, RETRIES + 1
        for attempt in range(1, tries + 1):
            waiting.attempt = attempt
            last = attempt == tries
            request = urllib.request.Request(url, body, self._headers(), method=self.config.method)
            try:
                deadline = time.monotonic() + self.timeout
                with _opener.open(request, timeout=self.timeout) as response:
                    data = decoded(read_within(response, deadline, self.timeout),
                                   response.headers.get("Content-Encoding"))
                try:
                    reply = json.loads(data)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    shown = data[:80].decode("utf-8", "replace")
                    raise BadShape(f"the reply is not JSON ({first_line(shown)!r})") from None
                return reply if self.config.response is None else _read(reply, self.config.response)
            except urllib.error.HTTPError as exc:
                status, said = exc.code, _said(exc)
                if status in (400, 422):
                    raise Rejected(f"{said} (HTTP {status})") from None
                if 300 <= status < 400:
                    where = exc.headers.get("Location") or "an address it does not name"
                    raise Unreachable(f"the system at {self.url} answered HTTP {status}, redirecting to {where}: "
                                      f"set system.http to the address that answers (tuner does not follow a "
                                      f"redirect with a POST)") from None
                if status != 429 and status < 500:
                    raise Unreachable(f"the system at {self.url} answered HTTP {status}: {said}") from None
                asked = retry_after(exc.headers) if status == 429 else None
                if asked is not None and asked > MOST_RETRY_AFTER:
                    raise Unreachable(f"the system at {self.url} answered HTTP 429 and asked for a wait of "
                                      f"{asked:g} s, beyond the {MOST_RETRY_AFTER:g} s tuner waits") from None
                if last:
                    if status == 429 or status in OUTAGE:
                        raise Unreachable(f"the system at {self.url} answered HTTP {status} ({tries} tries): {said}"
                                          + ("" if status == 429 else ": is it down?")) from None
                    raise BadReply(f"the system answered HTTP {status} ({tries} tries): {said}") from None
                if asked is not None:
                    wait = max(asked, 0.0)
            except (TimeoutError, socket.timeout):
                if last:
                    raise BadReply(f"the system did not reply within {self.timeout:g} s ({tries} tries; raise "
                                   f"system.timeout for a slow system)") from None
            except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as exc:
                if isinstance(getattr(exc, "reason", None), TimeoutError):
                    if last:
                        raise BadReply(f"the system did not reply within {self.timeout:g} s ({tries} tries; raise "
                                       f"system.timeout for a slow system)") from None
                elif last:
                    why = getattr(exc, "reason", exc)
                    raise Unreachable(f"cannot reach the system at {self.url} ({first_line(str(why))}; {tries} "
                                      f"tries): is it running?") from None
            time.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")  # the last try always returns or raises

    def unreachable(self) -> str | None:
        from tuner.models.registry import no_route

        why = no_route(self.url)
        return f"cannot reach the system at {self.url} ({why}): is it running?" if why else None


#: an environment variable named in a header's value
_ENV = re.compile(r"\$\{(\w+)\}")


def _fill(template: Any, values: Mapping[str, Any]) -> Any:
    """The template with its placeholders filled: a string that is one placeholder becomes the value itself (a
    knob's number stays a number), one inside text its words."""
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), template)
    if isinstance(template, dict):
        return {_fill(key, values): _fill(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, values) for value in template]
    return template


def _at(data: Any, path: str, what: str) -> Any:
    """The value at a dotted path; BadShape naming the step that is not there (and what is)."""
    node = data
    for step in path.split("."):
        if isinstance(node, Mapping) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            has = (f"it has {', '.join(map(repr, node))}" if isinstance(node, Mapping) else
                   f"it is {type(node).__name__}" + (f" of {len(node)}" if isinstance(node, list) else ""))
            raise BadShape(f"the reply has no {path!r} (system.response.{what}; at {step!r} {has})")
    return node


def _read(reply: Any, paths: HttpResponsePaths) -> dict[str, Any]:
    """A service's own reply as tuner's: the answer and the contexts where `paths` say they are."""
    contexts = _at(reply, paths.contexts, "contexts")
    if not isinstance(contexts, list):
        raise BadShape(f"the reply's {paths.contexts!r} is {type(contexts).__name__}, not a list (system.response."
                       f"contexts)")
    read = [{"text": _text(c, n, paths), "id": _at(c, paths.id, "id") if paths.id else None}
            for n, c in enumerate(contexts, 1)]
    return {"contexts": read, "contexts_from": f"the reply's {paths.contexts!r} (system.response.contexts)",
            **({"answer": _at(reply, paths.answer, "answer")} if paths.answer else {}),
            **({"usage": _usage(reply, paths.usage)} if paths.usage else {})}


def _usage(reply: Any, path: str) -> Mapping[str, Any]:
    """The token counts where `system.response.usage` points: an object, or BadShape (a usage taken as none would
    leave every token target at 0 in silence)."""
    usage = _at(reply, path, "usage")
    if not isinstance(usage, Mapping):
        raise BadShape(f"the reply's {path!r} is {type(usage).__name__}, not an object with prompt_tokens and "
                       f"completion_tokens (system.response.usage)")
    return usage


def _text(context: Any, number: int, paths: HttpResponsePaths) -> str:
    """A context's text where `paths.text` says it is, said by that path when it is not text."""
    text = _at(context, paths.text, "text") if paths.text else context
    if not isinstance(text, str):
        where = f"context {number}'s {paths.text!r}" if paths.text else f"context {number} of the reply"
        hint = "" if paths.text else ": system.response.text names its text within it"
        raise BadShape(f"{where} is {type(text).__name__}, not text (system.response.text{hint})")
    return text


def _said(error: urllib.error.HTTPError) -> str:
    """The server's own words: a JSON body's detail/error/message, else its text's first line."""
    try:
        text = error.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        for key in ("detail", "error", "message"):
            if data.get(key):
                return first_line(str(data[key]))
    return first_line(text or error.reason or "(no body)")
