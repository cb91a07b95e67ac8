"""Thin adapters from the frameworks people build RAG systems with to a tuner system, and from any Python system
to an HTTP service. Each maps the trial's knobs to the framework's own settings:

    # mysystem.py — `system: {python: "mysystem:answer", version: "1", knobs: {k: {type: int, default: 4}}}`
    from tuner.systems.adapters import langchain_system
    answer = langchain_system(lambda params: make_chain(retriever_k=params["k"]))   # built once per knob values
    # or a runnable whose configurable fields (`configurable_fields`) are named as the knobs:
    answer = langchain_system(chain)            # invoked with config={"configurable": params}
    # the chain as written: a string out, its retrievers' documents read through LangChain's callbacks

    answer = llamaindex_system(lambda params: index.as_query_engine(similarity_top_k=params["k"]))

    app = http_app(answer)                      # serve it: uvicorn mysystem:app — then `system: {http: URL}`

A retriever alone (LangChain's retrievers, LlamaIndex's `as_retriever`) returns contexts only: configure the system
with `answers: false` and a retrieval target.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Mapping, Sequence
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


def _made(given: Any, is_itself: bool, reaches: Callable[[str], bool],
          unreached: Callable[[str], str]) -> Callable[[Params], Any]:
    """What answers for a trial's knobs: `given` itself when `is_itself` (a knob that does not reach it fails the
    question, `unreached(name)` saying why), else what the builder `given` builds from them (once per knob values)."""
    if not is_itself:
        return _built(given)

    def made(params: Params) -> Any:
        unmapped = [name for name in params if not reaches(name)]
        if unmapped:
            raise ValueError(f"knob {unmapped[0]} {unreached(unmapped[0])}")
        return given

    return made


def langchain_system(runnable_or_build: Any, input_key: str | None = None,
                     id_key: str | None = None) -> Callable[[dict, dict], dict]:
    """A tuner system from a LangChain runnable as it is written: a retriever, an LCEL chain that returns a string,
    `create_retrieval_chain`, `RetrievalQA`, an agent with a retriever tool. Either the runnable itself, invoked with
    the trial's knobs as its configurable fields, or a function of the knobs that builds it (built once per knob
    values).

    The question goes in as the chain takes it: a string, or a dict under the chain's one input key (read from its
    input schema; `input_key` where it has several). The answer is its output (a string, a message, or a dict's
    `answer`, `result` or `output`); the contexts are the documents the output carries (`context`,
    `source_documents`), else every document a retriever inside the call returned or a tool returned as its artifact,
    seen through LangChain's callbacks as tracing integrations see them. An agent (its input `messages`) is sent the
    question as the user's message; its answer is its last message. A context's id is its Document's metadata `id_key`
    where given, else the Document's `id`, else metadata's id, doc_id or source."""
    from langchain_core.runnables import Runnable

    if isinstance(runnable_or_build, Runnable):
        runnable = runnable_or_build

        def made(params: Params) -> tuple[Runnable, dict[str, Any]]:
            return runnable, {"configurable": dict(params)}
    else:
        built = _built(runnable_or_build)

        def made(params: Params) -> tuple[Runnable, dict[str, Any]]:
            return built(params), {}

    def system(question: dict, params: dict) -> dict:
        chain, config = made(params)
        seen = _retrieved()
        output = chain.invoke(_chain_input(chain, question["text"], input_key), config={**config, "callbacks": [seen]})
        return langchain_reply(output, seen.documents, id_key, seen.origin())

    return system


def _chain_input(chain: Any, question: str, input_key: str | None) -> Any:
    """The question as `chain` takes it: under `input_key`, else a string or a dict under its one input key."""
    if input_key is not None:
        return {input_key: question}
    schema = chain.get_input_jsonschema()
    keys = list(schema.get("properties", {})) if schema.get("type", "object") == "object" else []
    required = [k for k in keys if k in schema.get("required", ())]
    key = keys[0] if len(keys) == 1 else required[0] if len(required) == 1 else None
    if not keys:
        return question
    if key == "messages":  # an agent's state: the question is the user's one message
        return {key: [{"role": "user", "content": question}]}
    if key is not None:
        return {key: question}
    raise ValueError(f"the chain takes {', '.join(keys)}: say which holds the question with "
                     f"langchain_system(..., input_key=NAME)")


def _retrieved() -> Any:
    """A callback handler that keeps every document a retriever returned during one call, and those a tool returned as
    its artifact (the RAG tutorial's agent tool searches a vector store and returns the documents it found so)."""
    from langchain_core.callbacks import BaseCallbackHandler

    class Retrieved(BaseCallbackHandler):
        def __init__(self) -> None:
            self.documents: list[Any] = []
            self.sources: list[str] = []  # where they came from, in order, each named once

        def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
            self.keep(documents, "the retrievers inside the call")

        def on_tool_end(self, output: Any, **kwargs: Any) -> None:
            found = getattr(output, "artifact", None)
            if isinstance(found, list) and all(hasattr(d, "page_content") for d in found):
                self.keep(found, f"tool {getattr(output, 'name', None) or 'a tool'}'s artifact")

        def keep(self, documents: Any, source: str) -> None:
            new = [d for d in documents if not any(d is seen for seen in self.documents)]  # a retriever tool's
            self.documents.extend(new)  # documents are seen as the retriever ends and again as the tool does
            if new and source not in self.sources:
                self.sources.append(source)

        def origin(self) -> str:
            return " and ".join(self.sources) + " (LangChain's callbacks)" if self.sources else \
                "no retriever ran and no tool returned documents (LangChain's callbacks)"

    return Retrieved()


#: the keys of a chain's output dict its answer is read from, in order
ANSWER_KEYS = ("answer", "result", "output")


def langchain_reply(output: Any, retrieved: Sequence[Any] = (), id_key: str | None = None,
                    retrieved_from: str = "the retrievers inside the call") -> dict[str, Any]:
    """A LangChain runnable's output as a tuner reply: `retrieved` are the documents its retrievers (and tools)
    returned, found where `retrieved_from` says."""
    def contexts(docs: Any) -> Any:
        return [_document(d, id_key) for d in docs] if isinstance(docs, list) else docs

    if isinstance(output, list) and all(hasattr(d, "page_content") for d in output):
        return {"contexts": contexts(output), "contexts_from": "the retriever's output"}  # contexts only
    answer, docs, origin = output, list(retrieved), retrieved_from
    looked = {}
    if isinstance(output, Mapping):
        answer = next((output[k] for k in ANSWER_KEYS if k in output), None)
        if answer is None and output.get("messages"):  # an agent's state: its last message answers
            answer = output["messages"][-1]
        if answer is None:  # said where a null answer is refused: which keys were read, which the output has
            looked = {"answer_from": f"the chain's output has none of {', '.join(ANSWER_KEYS)} or messages (it "
                                     f"has {', '.join(map(repr, output)) or 'no key'})"}
        key = next((k for k in ("context", "source_documents", "contexts") if isinstance(output.get(k), list)), None)
        if key is not None:
            docs, origin = output[key], f"the chain's output {key!r}"
    return {"answer": getattr(answer, "content", answer), "contexts": contexts(docs), "contexts_from": origin,
            **looked}


def _document(doc: Any, id_key: str | None = None) -> Any:
    """A LangChain Document as a context (its id, else metadata's `id_key`, id, doc_id or source); anything else as
    given."""
    if not hasattr(doc, "page_content"):
        return doc
    meta = getattr(doc, "metadata", None) or {}
    return {"text": doc.page_content,
            "id": _doc_id(meta, id_key, getattr(doc, "id", None), meta.get("id"), meta.get("doc_id"),
                          meta.get("source"))}


def _doc_id(meta: Mapping[str, Any], id_key: str | None, *otherwise: Any) -> str | None:
    """A context's document id: its metadata's `id_key` where one is given, else the first of `otherwise` that is
    set. An `id_key` a document's metadata lacks is the adapter's wiring, not that document's: said with the keys
    the metadata has, so the question fails in words rather than as an id that is missing."""
    if id_key:
        if id_key not in meta:
            raise ValueError(f"id_key {id_key!r} names no key of a document's metadata (it has "
                             f"{', '.join(map(repr, meta)) or 'none'}): pass the key that holds the document id")
        found = meta[id_key]
    else:
        found = next((value for value in otherwise if value), None)
    return None if found is None else str(found)


#: the open pipeline inputs a Haystack pipeline takes the question by, unless told (`question_to`)
QUESTION_INPUTS = ("query", "question", "text")


def haystack_system(pipeline_or_build: Any, knobs: Mapping[str, str] | None = None,
                    question_to: Sequence[str] | None = None, documents_from: str | None = None,
                    id_key: str | None = None) -> Callable[[dict, dict], dict]:
    """A tuner system from a Haystack pipeline as it is written (haystack-ai), or a function of the knobs that builds
    one (built once per knob values). The question goes to every open input named query, question or text
    (`question_to=["retriever.query", "prompt_builder.question"]` says where); a knob to a component's run parameter
    (`knobs={"k": "retriever.top_k"}`). The answer is an AnswerBuilder's answer, else a generator's first reply; the
    contexts are the AnswerBuilder's documents, else the documents `documents_from` (a component) output, else those
    of the last component that outputs documents. A context's id is its Document's metadata `id_key`, else its id,
    doc_id or source, else the Document's own id (a hash of its content, unless you set it)."""
    from haystack import Pipeline

    made = _made(pipeline_or_build, isinstance(pipeline_or_build, Pipeline), lambda name: name in (knobs or {}),
                 lambda name: f"reaches no component: map it with knobs={{{name!r}: 'component.input'}}, or build the "
                              f"pipeline from the knobs")

    def system(question: dict, params: dict) -> dict:
        pipeline = made(params)
        targets = list(question_to or (f"{component}.{name}" for component, inputs in pipeline.inputs().items()
                                       for name in inputs if name in QUESTION_INPUTS))
        if not targets:
            raise ValueError("the pipeline has no open input named query, question or text: say where the question "
                             "goes with haystack_system(..., question_to=['component.input'])")
        data: dict[str, dict[str, Any]] = {}
        for target, value in [*((t, question["text"]) for t in targets),
                              *((target, params[name]) for name, target in (knobs or {}).items())]:
            component, _, name = target.partition(".")
            data.setdefault(component, {})[name] = value
        outputs = pipeline.run(data, include_outputs_from=set(pipeline.graph.nodes))
        return haystack_reply(outputs, documents_from, id_key)

    return system


def haystack_reply(outputs: Mapping[str, Any], documents_from: str | None = None,
                   id_key: str | None = None) -> dict[str, Any]:
    """A Haystack pipeline's outputs (every component's) as a tuner reply."""
    answers = [a for out in outputs.values() for a in out.get("answers") or () if hasattr(a, "data")]
    replies = [r for out in outputs.values() for r in out.get("replies") or ()]
    if documents_from is not None:
        documents, origin = (outputs.get(documents_from) or {}).get("documents"), documents_from
    elif answers and answers[0].documents:
        documents, origin = answers[0].documents, "the answer builder's answer"
    else:
        origin, documents = next(((name, out["documents"]) for name, out in reversed(list(outputs.items()))
                                  if "documents" in out), ("no component", None))
    answer = answers[0].data if answers else (getattr(replies[0], "text", replies[0]) if replies else None)
    return {**({"answer": answer} if answer is not None else {}),
            "contexts": [_haystack_document(d, id_key) for d in documents or []],
            "contexts_from": f"the documents of {origin} (Haystack's pipeline outputs)"}


def _haystack_document(doc: Any, id_key: str | None) -> dict[str, Any]:
    meta = getattr(doc, "meta", None) or {}
    return {"text": doc.content or "",
            "id": _doc_id(meta, id_key, meta.get("id"), meta.get("doc_id"), meta.get("source"), doc.id)}


#: the input and output fields a DSPy program passes its passages in
PASSAGE_FIELDS = ("context", "contexts", "passages")


def dspy_system(program_or_build: Any, id_of: Callable[[str], str | None] | None = None,
                input_field: str | None = None) -> Callable[[dict, dict], dict]:
    """A tuner system from a DSPy program as it is written (a `dspy.Module`, with the LM the user configured), or a
    function of the knobs that builds one (built once per knob values). The question goes in as its `forward`'s first
    argument (`input_field` to name another); the answer is the prediction's `answer`; the contexts are the passages
    the program handed a module (its `context`, `contexts` or `passages` input, seen through DSPy's callbacks), else
    the prediction's own. A passage is text, or a dict with text/long_text and id/pid; `id_of(text)` names the
    document of a passage that is text alone."""
    import dspy
    from dspy.utils.callback import BaseCallback

    class Passed(BaseCallback):
        """Keeps the first passages a module of the program was handed."""

        def __init__(self) -> None:
            self.passages: list[Any] | None = None
            self.origin = ""

        def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
            given = inputs.get("kwargs") or {}
            field = next((f for f in PASSAGE_FIELDS if isinstance(given.get(f), list)), None)
            if self.passages is None and field is not None:
                self.passages = given[field]
                self.origin = f"the {field!r} handed to {type(instance).__name__} (DSPy's callbacks)"

    made = _made(program_or_build, isinstance(program_or_build, dspy.Module), lambda name: False,
                 lambda name: "reaches no part of the program: build the program from the knobs "
                              "(dspy_system(lambda params: RAG(k=params['k'])))")

    def system(question: dict, params: dict) -> dict:
        program = made(params)
        # the class's forward: DSPy warns when an instance's forward is touched outside a call
        name = input_field or list(inspect.signature(type(program).forward).parameters)[1]
        passed = Passed()
        with dspy.context(callbacks=[*dspy.settings.get("callbacks", []), passed]):
            prediction = program(**{name: question["text"]})
        own = next((f for f in PASSAGE_FIELDS if isinstance(prediction.get(f), list)), None)
        passages, origin = ((passed.passages, passed.origin) if passed.passages is not None else
                            (prediction.get(own), f"the prediction's {own!r}") if own else
                            ([], "no module was handed passages as context, contexts or passages"))
        return {"answer": prediction.get("answer"), "contexts": [_passage(p, id_of) for p in passages],
                "contexts_from": origin}

    return system


def _passage(passage: Any, id_of: Callable[[str], str | None] | None) -> dict[str, Any]:
    if isinstance(passage, Mapping):
        text = passage.get("text") or passage.get("long_text") or ""
        doc_id = passage.get("id", passage.get("pid"))
    else:
        text, doc_id = str(passage), None
    if doc_id is None and id_of is not None:
        doc_id = id_of(text)
    return {"text": text, "id": None if doc_id is None else str(doc_id)}


def llamaindex_system(build: Callable[[dict[str, Any]], Any],
                      id_key: str | None = None) -> Callable[[dict, dict], dict]:
    """A tuner system from LlamaIndex: `build(params)` makes a query engine, a chat engine (answer and source nodes)
    or a retriever (contexts only) for the trial's knobs, e.g. `index.as_query_engine(similarity_top_k=params["k"])`.
    A chat engine's memory is reset before each question: each is asked alone, as a study asks it. A context's id is
    its node's metadata `id_key`, else metadata's id or doc_id, else the node's `ref_doc_id` (its Document's `id_`,
    random unless you set it)."""
    built = _built(build)

    def system(question: dict, params: dict) -> dict:
        engine = built(params)
        if hasattr(engine, "query") or hasattr(engine, "chat"):
            if hasattr(engine, "query"):
                response = engine.query(question["text"])
            else:
                engine.reset()
                response = engine.chat(question["text"])
            return {"answer": str(getattr(response, "response", response) or ""),
                    "contexts": [_node(n, id_key) for n in getattr(response, "source_nodes", [])],
                    "contexts_from": "the response's source nodes"}
        return {"contexts": [_node(n, id_key) for n in engine.retrieve(question["text"])],
                "contexts_from": "the retriever's nodes"}

    return system


def _node(scored: Any, id_key: str | None = None) -> dict[str, Any]:
    """A LlamaIndex node (with or without its score) as a context: its document's id where it has one."""
    node = getattr(scored, "node", scored)
    meta = getattr(node, "metadata", None) or {}
    return {"text": node.get_content(),
            "id": _doc_id(meta, id_key, meta.get("id"), meta.get("doc_id"), getattr(node, "ref_doc_id", None))}


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
        question = body["question"]
        if not isinstance(question, dict) or not isinstance(question.get("text"), str):
            raise HTTPException(400, f"the request's 'question' is {type(question).__name__}, not an object with "
                                     f"its text (and id): {{\"question\": {{\"id\": \"q1\", \"text\": \"…\"}}}}")
        if not isinstance(body.get("params", {}), dict):
            raise HTTPException(400, "the request's 'params' is not an object of knob values")
        try:
            return await run_in_threadpool(system, question, body.get("params", {}))
        except Rejected as exc:
            raise HTTPException(422, str(exc)) from None
        except Exception as exc:
            raise HTTPException(500, f"{type(exc).__name__}: {exc}") from None

    return app
