"""The systems teams already run, tuned as they are. Each framework's RAG code as its docs write it (tests/
langchain_tutorial.py, llamaindex_engines.py, haystack_pipeline.py, dspy_program.py), an existing HTTP service that
does not speak tuner's JSON, and a program tuned as a command: `tuner optimize` runs 2 trials over two of its knobs
(k, which reaches its retriever, and its prompt) on a shared dataset (SQuAD 2.0's Normans articles), each system's own
retriever over that corpus, and scores the contexts by the documents' ids its adapter read. The chat models are the
frameworks' fakes (an id target does not read the answer), but for one run in which the tutorial's chain asks the 0.5B
through a local OpenAI-compatible server, as it would ask OpenAI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.fakes import CHAT, ChatService
from tests.helpers import dataset_path, own_answer, tuner

TESTS = Path(__file__).parent
QUESTIONS = 5

#: each system as its framework's code writes it, and the two values of its prompt knob
SYSTEMS = {
    "langchain-lcel-chain": ({"python": "langchain_tutorial:lcel"}, ("short", "careful")),
    "langchain-agent": ({"python": "langchain_tutorial:agent"}, ("short", "careful")),
    "langchain-create_retrieval_chain": ({"python": "langchain_tutorial:created"}, ("short", "careful")),
    "langchain-RetrievalQA": ({"python": "langchain_tutorial:qa"}, ("short", "careful")),
    "llamaindex-query-engine": ({"python": "llamaindex_engines:query"}, ("short", "careful")),
    "llamaindex-chat-engine": ({"python": "llamaindex_engines:chat"}, ("short", "careful")),
    "haystack-pipeline": ({"python": "haystack_pipeline:built"}, ("short", "careful")),
    "dspy-program": ({"python": "dspy_program:answer"}, ("plain", "cited")),
    "command": ({"command": [sys.executable, "own_command.py"]}, ("plain", "quote")),
}


@pytest.fixture
def normans(monkeypatch, tmp_path) -> Path:
    """The shared dataset, its corpus the one every test system retrieves from."""
    data = dataset_path("squad2_dev_normans")
    monkeypatch.setenv("OWN_SYSTEM_CORPUS", str(data / "corpus.jsonl"))
    monkeypatch.delenv("OWN_SYSTEM_GGUF", raising=False)
    return data


def two_trials(folder: Path, data: Path, system: dict, prompts: tuple[str, str]) -> list[dict]:
    """`tuner optimize` on `system` for 2 trials over k and a prompt knob, nDCG@10 the target, on the dataset's first
    5 questions (BM25 finds the gold document of 2 to 3 of them at any k): the trial files. Every context must have
    reached tuner with the id of a document of the dataset, as many as the trial's k (the knob reached the
    retriever), and each trial must have found gold documents."""
    (folder / "sys.yaml").write_text(yaml.safe_dump({
        "system": {"version": "1", **({} if "http" in system else {"path": str(TESTS)}), **system,
                   "knobs": {"k": {"type": "int", "default": 2}, "prompt": {"type": "str", "default": prompts[0]}}},
        "dataset": {"path": str(data)}}))
    (folder / "space.yaml").write_text(yaml.safe_dump({"params": {
        "k": {"type": "int", "low": 1, "high": 4}, "prompt": {"type": "categorical", "choices": list(prompts)}}}))
    result = tuner("optimize", "--config", "sys.yaml", "--search-space", "space.yaml", "--limit", str(QUESTIONS),
                   "--holdout", "0", "--judge-check", "off", "--study", "s", "--own-cache", "--target", "ndcg@10",
                   "--trials", "2", cwd=folder)
    assert result.returncode == 0, result.stderr
    trials = [json.loads(p.read_text()) for p in sorted((folder / "studies" / "s" / "trials").glob("*.json"))]
    assert len(trials) == 2
    documents = {json.loads(line)["_id"] for line in (data / "corpus.jsonl").read_text().splitlines() if line}
    for trial in trials:
        k = trial["params"]["k"]
        assert [len(q["selected"]) for q in trial["per_question"]] == [k] * QUESTIONS
        assert {c["doc_id"] for q in trial["per_question"] for c in q["selected"]} <= documents
    assert trials[0]["params"] == {"k": 2, "prompt": prompts[0]}  # the declared defaults first
    assert all(t["retrieval"]["ndcg@10"] > 0 for t in trials)
    return trials


@pytest.mark.parametrize("name", SYSTEMS)
def test_a_framework_s_rag_code_as_its_docs_write_it_is_tuned_unchanged(tmp_path, normans, name):
    system, prompts = SYSTEMS[name]
    two_trials(tmp_path, normans, system, prompts)


def test_an_existing_http_service_is_tuned_through_a_request_template_and_response_paths(tmp_path, normans,
                                                                                          monkeypatch):
    """The service as it is: no shim. Its contexts and ids read from its own fields; a knob's number stays a number in
    its request; the key travels in the header and is written nowhere tuner writes."""
    monkeypatch.setenv("CHAT_KEY", "s3cret")
    with ChatService(own_answer) as service:
        two_trials(tmp_path, normans, {"http": service.url, **CHAT}, ("plain", "quote"))
        sent = list(service.requests)
    first, headers = sent[0]
    assert first == {"message": first["message"], "top_k": 2, "style": "plain"}
    assert headers["X-Api-Key"] == "s3cret"
    written = [p for folder in ("studies", "reports") for p in (tmp_path / folder).rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"s3cret" in p.read_bytes()]


def test_the_tutorial_chain_asks_a_real_model_through_an_openai_compatible_server(tmp_path, normans, monkeypatch,
                                                                                 served_small_model):
    """LangChain's tutorial chain with OpenAI's chat model as the tutorial configures it, OPENAI_BASE_URL naming the
    0.5B behind llama.cpp's OpenAI-compatible server: its own answers, not a fake's."""
    monkeypatch.setenv("OPENAI_BASE_URL", served_small_model)
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    trials = two_trials(tmp_path, normans, {"python": "langchain_tutorial:lcel"}, ("short", "careful"))
    answers = [q["answer"] for t in trials for q in t["per_question"]]
    assert all(answers) and "The capital is Port Ardent." not in answers
