"""A system behind an HTTP endpoint: each question POSTed as JSON, the reply read as JSON.

Retries what an outage looks like, as the OpenAI-compatible LLM backend does: a refused connection, a timeout, 429
(waiting out its Retry-After, up to the same cap) and 5xx, with exponential backoff (0.5 s, 1 s, 2 s). A 502, 503 or
504 that outlasts the retries is an outage (the study stops, the trial runs again on resume); a 500 is the system's
own error on that question. `timeout` bounds the whole reply, not each read: a reply that trickles in never ends.
A redirect is not followed (urllib would turn the POST into a GET): its target is named. A bearer token is read
from the environment variable `api_key_env` names, at call time, and never stored.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from tuner.config import HttpSystemConfig
from tuner.env import secret
from tuner.errors import first_line
from tuner.models.llms._openai import MOST_RETRY_AFTER, RETRIES, retry_after
from tuner.systems._base import BadReply, BadShape, Rejected, System, Unreachable

#: the first backoff; each retry waits twice the one before
BACKOFF = 0.5
#: what a gateway or a server says while it is down or restarting: an outage, not the configuration's failure
OUTAGE = (502, 503, 504)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect comes back as the HTTPError it is: urllib would re-send the POST as a GET without its body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


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
        self._headers()  # an unset variable is named now, not at the first question

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if not self.api_key_env:
            return headers
        return {**headers, "Authorization": f"Bearer {secret(self.api_key_env, 'system.api_key_env')}"}

    def ask(self, question: Mapping[str, str], params: Mapping[str, Any]) -> Any:
        body = json.dumps({"question": dict(question), "params": dict(params)}).encode()
        wait, tries = BACKOFF, RETRIES + 1
        for attempt in range(1, tries + 1):
            last = attempt == tries
            request = urllib.request.Request(self.url, body, self._headers(), method="POST")
            try:
                deadline = time.monotonic() + self.timeout
                with _opener.open(request, timeout=self.timeout) as response:
                    data = read_within(response, deadline, self.timeout)
                try:
                    return json.loads(data)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    shown = data[:80].decode("utf-8", "replace")
                    raise BadShape(f"the reply is not JSON ({first_line(shown)!r})") from None
            except urllib.error.HTTPError as exc:
                status, said = exc.code, _said(exc)
                if status in (400, 422):
                    raise Rejected(f"the system refused the request with HTTP {status}: {said}") from None
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
