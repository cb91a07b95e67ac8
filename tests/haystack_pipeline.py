"""A RAG pipeline written as Haystack's docs write one, over the test corpus: an in-memory store, a BM25 retriever, a
prompt builder, a generator and an answer builder. Nothing here is shaped for tuner but the last lines. The
generator is a stand-in component (the answer text does not matter to these tests); each Document keeps its source
id in its metadata, as converters keep a file's name."""

from __future__ import annotations

from corpus_bm25 import corpus
from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder, PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from tuner.systems.adapters import haystack_system

TEMPLATES = {
    "short": "Answer in one sentence.\n{% for doc in documents %}{{ doc.content }}\n{% endfor %}Question: {{question}}",
    "careful": "Use only these documents; say you don't know otherwise.\n{% for doc in documents %}{{ doc.content }}"
               "\n{% endfor %}Question: {{question}}",
}


@component
class Generator:
    """Stands in for OpenAIGenerator or a local one: one reply per prompt."""

    @component.output_types(replies=list[str])
    def run(self, prompt: str):
        return {"replies": ["The capital is Port Ardent."]}


def store() -> InMemoryDocumentStore:
    documents = InMemoryDocumentStore()
    documents.write_documents([Document(content=d["text"], meta={"source": d["_id"]}) for d in corpus()])
    return documents


def rag(template: str) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store()))
    pipeline.add_component("prompt_builder", PromptBuilder(template=template, required_variables=["question"]))
    pipeline.add_component("llm", Generator())
    pipeline.add_component("answer_builder", AnswerBuilder())
    pipeline.connect("retriever", "prompt_builder.documents")
    pipeline.connect("prompt_builder", "llm")
    pipeline.connect("llm.replies", "answer_builder.replies")
    pipeline.connect("retriever", "answer_builder.documents")
    return pipeline


# the pipeline itself, its retriever's top_k a knob; or built from the knobs (the prompt), top_k still a run parameter
fixed = haystack_system(rag(TEMPLATES["short"]), knobs={"k": "retriever.top_k"})
built = haystack_system(lambda params: rag(TEMPLATES[params["prompt"]]), knobs={"k": "retriever.top_k"})
