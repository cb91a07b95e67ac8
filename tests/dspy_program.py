"""A RAG program written as DSPy's RAG tutorial writes one, over the demo corpus: a search function and a
ChainOfThought that answers from its context. Nothing here is shaped for tuner but the last lines. The LM is DSPy's
DummyLM (the answer text does not matter to these tests), configured as a user configures theirs."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import dspy
from dspy.utils import DummyLM

from tuner.systems.adapters import dspy_system

CORPUS = Path(os.environ.get("OWN_SYSTEM_CORPUS", Path(__file__).parents[1] / "tuner/data/demo/corpus.jsonl"))
dspy.configure(lm=DummyLM([{"reasoning": "The context says so.", "answer": "The capital is Port Ardent."}] * 1000))


@functools.cache
def corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line]


def search(query: str, k: int) -> list[str]:
    import bm25s

    index = bm25s.BM25()
    index.index(bm25s.tokenize([d["text"] for d in corpus()], show_progress=False), show_progress=False)
    found, _ = index.retrieve(bm25s.tokenize([query], show_progress=False), k=k, show_progress=False)
    return [corpus()[int(i)]["text"] for i in found[0]]


class RAG(dspy.Module):
    def __init__(self, k: int = 3, signature: str = "context, question -> answer"):
        self.k = k
        self.respond = dspy.ChainOfThought(signature)

    def forward(self, question):
        context = search(question, self.k)
        return self.respond(context=context, question=question)


SIGNATURES = {"plain": "context, question -> answer", "cited": "context: list[str], question -> answer"}
answer = dspy_system(lambda params: RAG(k=params["k"], signature=SIGNATURES[params["prompt"]]),
                     id_of=lambda text: next((d["_id"] for d in corpus() if d["text"] == text), None))
