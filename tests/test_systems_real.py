"""A user's own system tuned for real: its own BM25 retriever over a shared dataset answering with the 0.5B model
(llama.cpp, in the system's own process space), judged by the 0.5B, a 4-trial faithfulness study over two of its
knobs with a held-out verdict and a report — as a Python function, then served over HTTP by the FastAPI adapter.
The adapters for LangChain (a real LCEL chain) and LlamaIndex (when its extra is installed) run here too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import dataset_path, free_port, tuner
from tuner.study.results import read_study
from tuner.study.storage import study_folder

TESTS = Path(__file__).parent
KNOBS = {"k": {"type": "int", "default": 2}, "prompt": {"type": "str", "default": "plain"}}
SPACE = {"params": {"k": {"type": "int", "low": 1, "high": 3}, "prompt": {"type": "categorical",
                                                                         "choices": ["plain", "quote"]}}}


def study(folder: Path, system: dict, gguf: Path, data: Path, name: str, cache: Path) -> tuple[dict, str]:
    """A 4-trial faithfulness study of `system` on 4 questions (2 held out); the trial files and the report."""
    model = {"model": "qwen2.5-0.5b", "path": str(gguf), "n_ctx": 4096}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump({
        "system": {"version": "1", "knobs": KNOBS, **system}, "dataset": {"path": str(data)}, "judge": model,
        "generator": model, "cache_dir": str(cache)}))
    (folder / "space.yaml").write_text(yaml.safe_dump(SPACE))
    ran = tuner("optimize", "--config", f"{name}.yaml", "--search-space", "space.yaml", "--limit", "4", "--holdout",
                "0.5", "--judge-check", "off", "--study", name, "--target", "faithfulness", "--trials", "4",
                cwd=folder)
    assert ran.returncode == 0, ran.stderr
    view = read_study(study_folder(folder / "studies", name))
    return view, (folder / "reports" / name / "report.md").read_text()


def test_a_real_system_is_tuned_as_a_python_function_and_as_an_http_service(tmp_path, small_gguf):
    data = dataset_path("squad2_dev_normans")
    env = {"OWN_SYSTEM_CORPUS": str(data / "corpus.jsonl"), "OWN_SYSTEM_GGUF": str(small_gguf),
           "OWN_SYSTEM_CALLS": str(tmp_path / "calls.jsonl")}
    os.environ.update(env)  # the tuner child inherits them, as a deployed system reads its settings
    try:
        view, report = study(tmp_path, {"python": "own_system:answer", "path": str(TESTS)}, small_gguf, data, "py",
                             tmp_path / "cache")
        knobs = [t.file.pipeline["system"] for t in view.trials if t.file]
        assert len(knobs) == 4 and knobs[0] == {"k": 2, "prompt": "plain"}
        asked = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
        assert {json.dumps(k, sort_keys=True) for k in knobs} <= {json.dumps(c["params"], sort_keys=True)
                                                                   for c in asked}  # the knobs reached it
        best = view.best
        assert best.result.value("faithfulness") is not None
        assert best.held_out is not None and len(best.held_out.questions) == 2  # the verdict, held out
        assert "python:own_system:answer version 1" in json.dumps(best.result.models)
        assert "held-out" in report.lower()

        # the same system behind HTTP, served by tuner's FastAPI adapter; the judge's calls come from the cache
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "own_service:app", "--port", str(port),
                                   "--log-level", "warning"], cwd=TESTS, env={**os.environ, **env})
        try:
            deadline = time.monotonic() + 60
            while socket.socket().connect_ex(("127.0.0.1", port)) and time.monotonic() < deadline:
                time.sleep(0.2)
            view, report = study(tmp_path, {"http": f"http://127.0.0.1:{port}/", "concurrency": 2}, small_gguf, data,
                                 "http", tmp_path / "cache")
        finally:
            server.terminate()
            server.wait(30)
        assert len([t for t in view.trials if t.file]) == 4
        assert view.best.held_out is not None and "held-out" in report.lower()
        assert f"http://127.0.0.1:{port}/ version 1" in json.dumps(view.best.result.models)
    finally:
        for key in env:
            os.environ.pop(key, None)


def test_the_langchain_adapter_runs_a_real_chain_with_the_trial_s_k():
    """An LCEL chain of a retriever and an answer step, built per trial's knobs; and a runnable whose configurable
    field is the knob itself."""
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import ConfigurableField, RunnableLambda, RunnableParallel, RunnablePassthrough

    from tuner.systems import Reply
    from tuner.systems.adapters import langchain_system

    class Shelf(BaseRetriever):
        k: int = 2

        def _get_relevant_documents(self, query, *, run_manager=None):
            docs = [Document(page_content=f"Passage {n} about {query}", metadata={"id": f"d{n}"}) for n in range(9)]
            return docs[: self.k]

    def chain(params):
        return RunnableParallel(context=Shelf(k=params["k"]), question=RunnablePassthrough()) | RunnableLambda(
            lambda x: {"answer": f"{len(x['context'])} passages say so.", "context": x["context"]})

    reply = Reply.parse(langchain_system(chain)({"id": "q", "text": "bridges"}, {"k": 3}))
    assert reply.answer == "3 passages say so." and [c.id for c in reply.contexts] == ["d0", "d1", "d2"]
    configurable = Shelf().configurable_fields(k=ConfigurableField(id="k"))
    reply = Reply.parse(langchain_system(configurable)({"id": "q", "text": "bridges"}, {"k": 4}), answers=False)
    assert reply.answer is None and len(reply.contexts) == 4


def test_the_llamaindex_adapter_maps_k_to_similarity_top_k():
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install "
                                                   "'rag-tuner[llamaindex]')")
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    from tuner.systems import Reply
    from tuner.systems.adapters import llamaindex_system

    index = VectorStoreIndex.from_documents([Document(text=f"Passage {n}.", id_=f"d{n}") for n in range(6)],
                                            embed_model=MockEmbedding(embed_dim=8))
    system = llamaindex_system(lambda params: index.as_retriever(similarity_top_k=params["k"]))
    reply = Reply.parse(system({"id": "q", "text": "passage"}, {"k": 3}), answers=False)
    assert len(reply.contexts) == 3 and all(c.id.startswith("d") for c in reply.contexts)


def test_the_llamaindex_adapter_asks_a_chat_engine_each_question_alone_and_reads_ids_by_a_metadata_key():
    """A chat engine as LlamaIndex's docs build one: its answer and source nodes read, its memory reset before each
    question (a study asks each alone); a query engine's contexts named by a metadata key."""
    pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install "
                                                   "'rag-tuner[llamaindex]')")
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    from tuner.systems import Reply
    from tuner.systems.adapters import llamaindex_system

    index = VectorStoreIndex.from_documents(
        [Document(text=f"Passage {n} about bridges.", id_=f"d{n}", metadata={"source": f"s{n}"}) for n in range(6)],
        embed_model=MockEmbedding(embed_dim=8))
    engines = []

    def chat_engine(params):
        engines.append(index.as_chat_engine(chat_mode="context", llm=MockLLM(max_tokens=8),
                                            similarity_top_k=params["k"]))
        return engines[-1]

    chat = llamaindex_system(chat_engine)
    for text in ("bridges?", "which bridge?"):
        reply = Reply.parse(chat({"id": "q", "text": text}, {"k": 2}))
        assert reply.answer and [c.id[0] for c in reply.contexts] == ["d", "d"]
    assert len(engines) == 1 and len(engines[0].chat_history) == 2  # one question and its answer: the last alone
    query = llamaindex_system(lambda p: index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=p["k"]),
                              id_key="source")
    reply = Reply.parse(query({"id": "q", "text": "bridges?"}, {"k": 3}))
    assert len(reply.contexts) == 3 and all(c.id.startswith("s") for c in reply.contexts)
