"""Fakes for unit tests of plumbing; every capability also has a real-model test."""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections.abc import Sequence

import numpy as np

from tuner.models.embedders import Embedder, normalise
from tuner.models.llms import LLM, Completion


class HashingEmbedder(Embedder):
    """Bag of hashed words: deterministic, instant, and similar texts get similar vectors."""

    name = "hashing-test"

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.calls = 0
        self.texts_encoded = 0

    def encode(self, texts: Sequence[str], on_progress=None) -> np.ndarray:
        self.calls += 1
        self.texts_encoded += len(texts)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                rows[i, zlib.crc32(word.encode()) % self.dim] += 1.0
            rows[i, -1] += 1e-3  # no all-zero rows
        if on_progress:
            on_progress(len(texts))
        return normalise(rows)


def send(handler, status: int, body: bytes, kind: str, headers: dict | None = None) -> bool:
    """A local test server's answer; False when the client gave up first (a timeout, Ctrl-C)."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    except OSError:
        return False
    return True


def trickle(handler, every: float = 0.2, size: int = 1000) -> None:
    """A reply that never ends in practice: headers promising `size` bytes, then one byte each `every` seconds (a
    read never waits long, so only a deadline on the whole reply stops the client), until the client leaves."""
    import time

    try:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        for _ in range(size):
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(every)
    except OSError:
        pass


class ScriptedLLM(LLM):
    """Answers like a well-behaved model: DSPy's field format for generation, valid JSON for each RAGAS
    response model, a yes-probability from word overlap. `garbage=True` makes every JSON reply unparsable."""

    def __init__(self, name: str = "scripted", garbage: bool = False):
        self.name = name
        self.garbage = garbage
        self.calls: list[dict] = []

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        self.calls.append({"messages": messages, "json_schema": json_schema, "seed": seed})
        if json_schema is None:
            return Completion(self.fields(messages) + "[[ ## completed ## ]]", 50, 10)
        if self.garbage:
            return Completion("Sure! Here is my verdict: yes", 40, 8)
        return Completion(json.dumps(SCRIPTED_JSON[json_schema.get("title", "")]), 40, 8)

    @staticmethod
    def fields(messages) -> str:
        """DSPy's chat format for the output fields the system message asks for: the answer, or any other
        field (a proposed instruction, when an optimizer asks) filled with a plausible sentence."""
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        block = system.split("Your output fields are:")[-1].split("All interactions")[0]
        names = re.findall(r"`(\w+)`", block) or ["answer"]
        text = {"answer": "The Sorrel Bridge [1]."}
        return "".join(f"[[ ## {name} ## ]]\n{text.get(name, f'Answer from the contexts only, citing [n] ({name}).')}"
                       f"\n\n" for name in names)

    def yes_probability(self, messages, reuse_prefix=False):
        """A reranker's question (after "question:"), a graded verdict's statement (after "statement:" or "claim:") or a
        graded usefulness verdict's reference (after "reference answer:", the passage after "passage:"): the share
        of its words the passage or context holds, three words or more counting as sure. Its own scripted answer
        it grades supported, as its sampled verdicts do."""
        self.calls.append({"messages": messages, "json_schema": None, "seed": 0, "reuse_prefix": reuse_prefix})
        text = messages[-1]["content"].lower()
        if any(f"statement: {said}\n" in text for said in SCRIPTED_SUPPORTED):
            return Completion("1.0", 30, 0)  # it stands by its scripted answer, as its scripted NLI verdict does
        if "reference answer:" in text:
            passage, asked = text.split("passage:")[1], text.split("reference answer:")[1].split("\n\n")[0]
        else:
            marker = next(m for m in ("statement:", "claim:", "question:") if m in text)
            passage, asked = text.split(marker)[0], text.split(marker)[1].split("\n\n")[0]
        overlap = len(set(re.findall(r"\w{4,}", asked)) & set(re.findall(r"\w{4,}", passage)))
        return Completion(repr(min(1.0, overlap / 3)), 30, 0)


#: the scripted answer's sentence and statement, supported whatever the contexts (as the scripted NLI says)
SCRIPTED_SUPPORTED = ("the sorrel bridge.", "the bridge is the sorrel bridge.")

SCRIPTED_JSON = {
    "QueryRewrite": {"questions": ["Which bridge crosses the river?", "Who designed the bridge?",
                                   "When did the bridge open?"]},
    "StatementGeneratorOutput": {"statements": ["The bridge is the Sorrel Bridge."]},
    "NLIStatementOutput": {"statements": [{"statement": "The bridge is the Sorrel Bridge.", "reason": "stated",
                                           "verdict": 1}]},
    "AnswerRelevanceOutput": {"question": "Which bridge is it?", "noncommittal": 0},
    "ContextPrecisionOutput": {"reason": "useful", "verdict": 1},
    "ContextRecallOutput": {"classifications": [{"statement": "It is the Sorrel Bridge.", "reason": "in context",
                                                 "attributed": 1}]},
}


def minicheck_reply(messages: list[dict]) -> tuple[str | None, dict | None]:
    """A checker LLM in Bespoke-MiniCheck's format only: its system message, then "Document: … Claim: …"; P(Yes) from
    the share of the claim's content words the document holds. Any other format: (None, None), refused."""
    from tuner.config import LexicalCheckerConfig
    from tuner.metrics.checkers import make_checker
    from tuner.metrics.graded import VERDICT_SYSTEM

    asked = re.fullmatch(r"Document: (.*)\nClaim: (.*)", messages[-1]["content"], re.S)
    if len(messages) != 2 or messages[0] != {"role": "system", "content": VERDICT_SYSTEM["minicheck"]} or not asked:
        return None, None
    held = make_checker(LexicalCheckerConfig(lexical="words")).supported([asked.group(1)], [asked.group(2)])[0]
    yes = 0.05 + 0.9 * held
    answer = "Yes" if yes >= 0.5 else "No"
    return answer, {"content": [{"token": answer, "logprob": 0.0, "bytes": None, "top_logprobs": [
        {"token": word, "logprob": math.log(p), "bytes": None} for word, p in (("Yes", yes), ("No", 1 - yes))]}]}


def guardian_reply(messages: list[dict]) -> tuple[str | None, dict | None]:
    """A checker LLM in Granite Guardian 3.x's groundedness format only: the risk named in the system message, the
    passages as a "context" turn, the statement as the assistant's; P(Yes) — the risk is there — from the share of
    the statement's content words the passages lack. Any other format: (None, None), refused."""
    from tuner.config import LexicalCheckerConfig
    from tuner.metrics.checkers import make_checker

    roles = [m["role"] for m in messages]
    if roles != ["system", "context", "assistant"] or messages[0]["content"] != "groundedness":
        return None, None
    held = make_checker(LexicalCheckerConfig(lexical="words")).supported([messages[1]["content"]],
                                                                          [messages[2]["content"]])[0]
    risk = 0.95 - 0.9 * held
    answer = "Yes" if risk >= 0.5 else "No"
    return answer, {"content": [{"token": answer, "logprob": 0.0, "bytes": None, "top_logprobs": [
        {"token": word, "logprob": math.log(p), "bytes": None} for word, p in (("Yes", risk), ("No", 1 - risk))]}]}


CHECKER_LLMS = {"minicheck": minicheck_reply, "granite-guardian": guardian_reply}


class FakeEndpoint:
    """An OpenAI-compatible server on a free local port: `mode` is "ok" (a short chat completion), "scripted"
    (answers as ScriptedLLM does, after `delay` seconds: a model other processes can use), "minicheck" or
    "granite-guardian" (a checker LLM that answers only in its own format: `CHECKER_LLMS`), or misbehaves on
    purpose: "500", "html" (a 200 that
    is not JSON), "broken json" (a 200 whose JSON is cut short), "slow" (answers after `delay` seconds), "429 once"
    (the first request is refused with HTTP 429 and a Retry-After of `delay` seconds, the rest answered as
    "scripted" at once), "trickle" (a byte now and then, never done). Records each request's Authorization header
    and body, each answer's body with the monotonic time it was sent (`answered`), and the most requests it held at
    once (`most_at_once`). Use as a context manager."""

    def __init__(self, mode: str = "ok", delay: float = 30.0):
        import http.server
        import threading
        import time

        self.mode, self.delay, self.requests, self.bodies = mode, delay, [], []
        self.answered: list[tuple[bytes, float]] = []
        self.most_at_once, holding, lock = 0, [0], threading.Lock()
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # the stdlib's name
                request_body = body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.requests.append(self.headers.get("Authorization"))
                endpoint.bodies.append(body)
                if endpoint.mode == "429 once" and len(endpoint.bodies) == 1:
                    self.send_response(429)
                    self.send_header("Retry-After", f"{endpoint.delay:g}")
                    self.send_header("Content-Type", "application/json")
                    refusal = b'{"error": {"message": "rate limited"}}'
                    self.send_header("Content-Length", str(len(refusal)))
                    self.end_headers()
                    self.wfile.write(refusal)
                    return
                if endpoint.mode == "trickle":
                    trickle(self)
                    return
                with lock:
                    holding[0] += 1
                    endpoint.most_at_once = max(endpoint.most_at_once, holding[0])
                if endpoint.mode in ("slow", "scripted"):
                    time.sleep(endpoint.delay)
                with lock:
                    holding[0] -= 1
                content, logprobs = "Ilsa Marrow.", None
                if endpoint.mode in CHECKER_LLMS:
                    content, logprobs = CHECKER_LLMS[endpoint.mode](json.loads(body)["messages"])
                if endpoint.mode in ("scripted", "429 once"):
                    request = json.loads(body)
                    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema")
                    content = ScriptedLLM()._chat(request["messages"], max_tokens=0, temperature=0, seed=0,
                                                  json_schema=schema).text
                    if request.get("logprobs"):  # a yes/no question: the scripted probability as logprobs
                        yes = float(ScriptedLLM().yes_probability(request["messages"]).text)
                        content = "yes" if yes >= 0.5 else "no"
                        logprobs = {"content": [{"token": content, "logprob": 0.0, "bytes": None, "top_logprobs": [
                            {"token": word, "logprob": math.log(max(p, 1e-9)), "bytes": None}
                            for word, p in (("yes", yes), ("no", 1 - yes))]}]}
                status, kind, body = {
                    "500": (500, "application/json", b'{"error": {"message": "model crashed"}}'),
                    **({endpoint.mode: (400, "application/json", b'{"error": {"message": "not the format this checker '
                                                               b'was trained on"}}')} if content is None else {}),
                    "html": (200, "text/html", b"<html><body>Welcome to nginx!</body></html>"),
                    "broken json": (200, "application/json", b'{"hello": [1,2'),
                }.get(endpoint.mode, (200, "application/json", json.dumps({
                    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                              "prompt_tokens_details": {"cached_tokens": 2}}}).encode()))
                if send(self, status, body, kind):
                    endpoint.answered.append((request_body, time.monotonic()))

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class SystemServer:
    """A user's RAG system behind HTTP on a free local port, speaking tuner's system JSON: each POST is answered by
    `answer(question, params)` (a Python system) after `delay` seconds, or misbehaves on purpose by `mode`: "ok",
    "not json" (a 200 that is HTML), "no answer", "text context" (a context that is a number), "400" (refuses the
    knobs), "500" (every request), "429 once" (the first request refused with a Retry-After of `delay` s), "503"
    (down), "302" (moved), "trickle" (a byte now and then, never done), "gzip" (a reply sent gzip-encoded), "br"
    (one that says an encoding tuner does not read); `mode` may change while it serves. Records
    each request's body, each answer's body with the monotonic time it was sent (`answered`), and the most requests
    it held at once. Use as a context manager."""

    def __init__(self, answer, mode: str = "ok", delay: float = 0.0):
        import http.server
        import threading
        import time

        self.mode, self.delay, self.bodies = mode, delay, []
        self.answered: list[tuple[bytes, float]] = []
        self.most_at_once, holding, lock = 0, [0], threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.bodies.append(body)
                request = json.loads(body)
                status, reply, kind = 200, None, "application/json"
                if server.mode == "429 once" and len(server.bodies) == 1:
                    send(self, 429, b'{"error": "slow down"}', kind, {"Retry-After": f"{server.delay:g}"})
                    return
                if server.mode == "trickle":
                    trickle(self)
                    return
                if server.mode == "302":
                    send(self, 302, b"", kind, {"Location": server.url + "/v2"})
                    return
                if server.mode == "503":
                    send(self, 503, b'{"detail": "restarting"}', kind)
                    return
                with lock:
                    holding[0] += 1
                    server.most_at_once = max(server.most_at_once, holding[0])
                if server.mode != "429 once":
                    time.sleep(server.delay)
                with lock:
                    holding[0] -= 1
                if server.mode == "400":
                    status, reply = 400, {"detail": f"k={request['params'].get('k')} is more than this index holds"}
                elif server.mode == "500":
                    status, reply = 500, {"detail": "KeyError: 'embedding'"}
                else:
                    reply = answer(request["question"], request["params"])
                    if server.mode == "no answer":
                        reply.pop("answer")
                    elif server.mode == "text context":
                        reply["contexts"][0] = 42
                data = b"<html>Bad Gateway</html>" if server.mode == "not json" else json.dumps(reply).encode()
                if server.mode in ("gzip", "br"):  # "br": an encoding tuner does not read (the bytes are gzip's)
                    send(self, status, gzip.compress(data), kind, {"Content-Encoding": server.mode})
                else:
                    send(self, status, data, "text/html" if server.mode == "not json" else kind)
                server.answered.append((body, time.monotonic()))

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/answer"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def asked(self) -> list[tuple[str, str]]:
        """(question id, knobs) of every request, in order."""
        return [(r["question"]["id"], json.dumps(r["params"], sort_keys=True)) for r in map(json.loads, self.bodies)]

    def __enter__(self) -> SystemServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class ChatService:
    """A team's existing service, not shaped for tuner: POST /chat {"message", "top_k", "style"} with an X-Api-Key
    header, answering {"reply", "sources": [{"content", "doc"}]} from `answer(question, params)` (a Python system).
    Records each request. Use as a context manager."""

    def __init__(self, answer):
        import http.server
        import threading

        self.requests: list[tuple[dict, dict]] = []
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                service.requests.append((body, dict(self.headers)))
                if self.headers.get("X-Api-Key") != "s3cret":
                    send(self, 401, b'{"error": "no key"}', "application/json")
                    return
                own = answer({"id": "?", "text": body["message"]}, {"k": body["top_k"], "prompt": body["style"]})
                out = {"reply": own["answer"], "sources": [{"content": c["text"], "doc": c["id"]}
                                                           for c in own["contexts"]]}
                send(self, 200, json.dumps(out).encode(), "application/json")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/chat"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()


#: how tuner talks to ChatService: its request, its header (the key from the environment) and where its reply is
CHAT = {"request": {"message": "{question}", "top_k": "{k}", "style": "{prompt}"},
        "headers": {"X-Api-Key": "${CHAT_KEY}"},
        "response": {"answer": "reply", "contexts": "sources", "text": "content", "id": "doc"}}
