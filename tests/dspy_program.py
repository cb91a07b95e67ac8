"""A RAG program written as DSPy's RAG tutorial writes one, over the test corpus: a search function (BM25) and a
ChainOfThought that answers from its context. Nothing here is shaped for tuner but the last lines. The LM is DSPy's
DummyLM (the answer text does not matter to these tests), configured as a user configures theirs."""

from __future__ import annotations

import corpus_bm25
import dspy
from dspy.utils import DummyLM

from tuner.systems.adapters import dspy_system

dspy.configure(lm=DummyLM([{"reasoning": "The context says so.", "answer": "The capital is Port Ardent."}] * 1000))


def search(query: str, k: int) -> list[str]:
    return [d["text"] for d in corpus_bm25.search(query, k)]


class RAG(dspy.Module):
    def __init__(self, k: int = 3, signature: str = "context, question -> answer"):
        self.k = k
        self.respond = dspy.ChainOfThought(signature)

    def forward(self, question):
        context = search(question, self.k)
        return self.respond(context=context, question=question)


SIGNATURES = {"plain": "context, question -> answer", "cited": "context: list[str], question -> answer"}
answer = dspy_system(lambda params: RAG(k=params["k"], signature=SIGNATURES[params["prompt"]]),
                     id_of=lambda text: next((d["_id"] for d in corpus_bm25.corpus() if d["text"] == text), None))
