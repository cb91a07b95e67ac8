"""A RAG system of a user's own, for the tests of `system:` — none of tuner's pipeline: its own BM25 retriever
(corpus_bm25) over a BEIR corpus, and an answer from a GGUF model through llama.cpp, or, without one, the best context's
first sentence. Its own call log (one JSON line per reply it gave) is what tests count calls with.

Settings come from the environment, as a deployed service's would: OWN_SYSTEM_CORPUS (a corpus.jsonl),
OWN_SYSTEM_GGUF (optional), OWN_SYSTEM_CALLS (the call log, optional), OWN_SYSTEM_DELAY (seconds a reply takes).
Knobs: `k` (contexts returned), `prompt` ("plain" or "quote": how the model is asked), `ids` (false: contexts as
bare text; "nodes": ids that name no document; "first": only the first context's id names its document).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time

from corpus_bm25 import search

_lock = threading.Lock()


@functools.cache
def _model(path: str):
    from llama_cpp import Llama

    return Llama(path, n_ctx=2048, n_threads=2, verbose=False)


PROMPTS = {"plain": "Answer the question in one sentence from the passages.",
           "quote": "Answer in one sentence using only words from the passages; say nothing they do not say."}


def answer(question: dict, params: dict) -> dict:
    time.sleep(float(os.environ.get("OWN_SYSTEM_DELAY", "0")))
    hits = search(question["text"], int(params.get("k", 3)))
    if os.environ.get("OWN_SYSTEM_GGUF"):
        passages = "\n\n".join(f"[{n}] {d['text']}" for n, d in enumerate(hits, 1))
        with _lock:  # one llama.cpp context answers one call at a time
            out = _model(os.environ["OWN_SYSTEM_GGUF"]).create_chat_completion(
                [{"role": "system", "content": PROMPTS[params.get("prompt", "plain")]},
                 {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question['text']}"}],
                max_tokens=60, temperature=0.0, seed=0)
        text, usage = out["choices"][0]["message"]["content"], out["usage"]
    else:
        text, usage = (hits[0]["text"].split(". ")[0] + "." if hits else ""), {}
    ids = params.get("ids", True)  # "nodes": a framework's own node ids, as LlamaIndex gives without `id_`; "first":
    # the first context's document id, the rest node ids

    def named(n: int, d: dict) -> str:
        return d["_id"] if ids is True or (ids == "first" and n == 0) else f"node-{d['_id'][::-1]}"

    reply = {"answer": text, "contexts": [{"text": d["text"], "id": named(n, d)} if ids else d["text"]
                                          for n, d in enumerate(hits)],
             "usage": {k: usage[k] for k in ("prompt_tokens", "completion_tokens") if k in usage}}
    if os.environ.get("OWN_SYSTEM_CALLS"):
        with _lock, open(os.environ["OWN_SYSTEM_CALLS"], "a") as log:
            log.write(json.dumps({"id": question["id"], "params": params}, sort_keys=True) + "\n")
    return reply


def broken(question: dict, params: dict) -> dict:
    """A system with a bug: it raises on every question."""
    raise KeyError("embedding")


def picky(question: dict, params: dict) -> dict:
    """A system that refuses a k its index cannot serve, as tuner's contract asks (`Rejected`)."""
    from tuner.systems import Rejected

    if params.get("k", 0) > 1:
        raise Rejected(f"k={params['k']}: this index serves at most 1 passage")
    return answer(question, params)
