"""Thin adapters from the frameworks people build RAG systems with to a tuner system, and from any Python system
to an HTTP service. Each maps the trial's knobs to the framework's own settings:

    # mysystem.py — `system: {python: "mysystem:answer", version: "1", knobs: {k: {type: int, default: 4}}}`
    from tuner.systems.adapters import langchain_system
    answer = langchain_system(lambda params: make_chain(retriever_k=params["k"]))   # built once per knob values
    # or a runnable whose configurable fields (`configurable_fields`) are named as the knobs:
    answer = langchain_system(chain)            # invoked with config={"configurable": params}

    answer = llamaindex_system(lambda params: index.as_query_engine(similarity_top_k=params["k"]))

    app = http_app(answer)                      # serve it: uvicorn mysystem:app — then `system: {http: URL}`

A retriever alone (LangChain's retrievers, LlamaIndex's `as_retriever`) returns contexts only: configure the system
with `answers: false` and a retrieval target.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from tuner.systems._base import Rejected

#: distinct knob values whose built object an adapter keeps (a study returns to the same ones often)
KEEP = 8

Params = Mapping[str, Any]


def _built(build: Callable[[dict[str, Any]], Any]) -> Callable[[Params], Any]:
    """`build(params)`, kept for the last `KEEP` distinct knob values (an index or a chain is costly to make); built
    once per knob values when questions are asked at once (a second asker waits for the first build)."""
    made: dict[str, Any] = {}
    building = threading.Lock()

    def get(params: Params) -> Any:
        key = json.dumps(dict(params), sort_keys=True, default=str)
        with building:
            if key not in made:
                made[key] = build(dict(params))
                while len(made) > KEEP:
                    made.pop(next(iter(made)))
            return made[key]

    return get


def langchain_system(runnable_or_build: Any) -> Callable[[dict, dict], dict]:
    """A tuner system from a LangChain runnable (a retriever, an LCEL chain): either the runnable itself, invoked
    with the trial's knobs as its configurable fields, or a function of the knobs that builds it. What it returns
    becomes the reply: a list of Documents (contexts only); a dict with `answer` and `context` (Documents), as
    `create_retrieval_chain` returns; or a dict with `answer` and `contexts`."""
    from langchain_core.runnables import Runnable

    if isinstance(runnable_or_build, Runnable):
        runnable = runnable_or_build

        def invoke(question: str, params: Params) -> Any:
            return runnable.invoke(question, config={"configurable": dict(params)})
    else:
        built = _built(runnable_or_build)

        def invoke(question: str, params: Params) -> Any:
            return built(params).invoke(question)

    def system(question: dict, params: dict) -> dict:
        return langchain_reply(invoke(question["text"], params))

    return system


def langchain_reply(output: Any) -> dict[str, Any]:
    """A LangChain runnable's output as a tuner reply."""
    if isinstance(output, list):
        return {"contexts": [_document(d) for d in output]}
    if isinstance(output, Mapping):
        answer = output.get("answer", output.get("result"))
        answer = getattr(answer, "content", answer)  # a chat model's message
        docs = output.get("context", output.get("source_documents", output.get("contexts")))
        contexts = [_document(d) for d in docs] if isinstance(docs, list) else docs
        return {"answer": answer, "contexts": contexts}
    return {"answer": getattr(output, "content", output)}  # no contexts: the reply check names what is missing


def _document(doc: Any) -> Any:
    """A LangChain Document as a context (its id, else metadata's id/doc_id/source); anything else as given."""
    if not hasattr(doc, "page_content"):
        return doc
    meta = getattr(doc, "metadata", None) or {}
    doc_id = getattr(doc, "id", None) or meta.get("id") or meta.get("doc_id") or meta.get("source")
    return {"text": doc.page_content, "id": None if doc_id is None else str(doc_id)}


def llamaindex_system(build: Callable[[dict[str, Any]], Any]) -> Callable[[dict, dict], dict]:
    """A tuner system from LlamaIndex: `build(params)` makes a query engine (answer and source nodes) or a
    retriever (contexts only) for the trial's knobs, e.g. `index.as_query_engine(similarity_top_k=params["k"])`."""
    built = _built(build)

    def system(question: dict, params: dict) -> dict:
        engine = built(params)
        if hasattr(engine, "query"):
            response = engine.query(question["text"])
            return {"answer": str(getattr(response, "response", response) or ""),
                    "contexts": [_node(n) for n in getattr(response, "source_nodes", [])]}
        return {"contexts": [_node(n) for n in engine.retrieve(question["text"])]}

    return system


def _node(scored: Any) -> dict[str, Any]:
    """A LlamaIndex node (with or without its score) as a context: its document's id where it has one."""
    node = getattr(scored, "node", scored)
    meta = getattr(node, "metadata", None) or {}
    doc_id = meta.get("id") or meta.get("doc_id") or getattr(node, "ref_doc_id", None)
    return {"text": node.get_content(), "id": None if doc_id is None else str(doc_id)}


def http_app(system: Callable[[dict, dict], Any]) -> Any:
    """A FastAPI app serving a Python system at POST / in tuner's JSON shape: `Rejected` answers 422 (the trial
    fails: its knobs are refused), any other error 500 with its message (that question fails)."""
    from fastapi import FastAPI, HTTPException
    from fastapi.concurrency import run_in_threadpool

    app = FastAPI(title="a RAG system tuner can tune")

    @app.post("/")
    async def answer(body: dict[str, Any]) -> Any:
        if "question" not in body:  # the request's fault; a KeyError inside the system is the system's (500)
            raise HTTPException(400, "the request lacks 'question'")
        try:
            return await run_in_threadpool(system, body["question"], body.get("params", {}))
        except Rejected as exc:
            raise HTTPException(422, str(exc)) from None
        except Exception as exc:
            raise HTTPException(500, f"{type(exc).__name__}: {exc}") from None

    return app
