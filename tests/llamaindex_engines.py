"""RAG code written as LlamaIndex's starter tutorial writes it: Documents, a VectorStoreIndex embedded by the model
`Settings` names, and the index's query engine and chat engine. Nothing here is shaped for tuner but the last lines.
The embedding is a real one (all-MiniLM-L6-v2, which tuner's embed extra installs, behind LlamaIndex's embedding
interface as any custom embedding is written); the LLM is LlamaIndex's MockLLM (the answer text does not matter to an
id target). Each Document keeps its source in its metadata, as SimpleDirectoryReader keeps a file's name, and has no
`id_` (so its nodes' ref_doc_id is random, as in the tutorial): the ids are read by the metadata key."""

from __future__ import annotations

import functools

from corpus_bm25 import corpus
from llama_index.core import Document, PromptTemplate, Settings, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM

from tuner.systems.adapters import llamaindex_system


class MiniLM(BaseEmbedding):
    """all-MiniLM-L6-v2 through sentence-transformers."""

    def _model(self):
        return _sentence_transformer()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._model().encode(query).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._model().encode(text).tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._model().encode(texts).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


@functools.cache
def _sentence_transformer():
    from sentence_transformers import SentenceTransformer

    from tuner.models.embedders._sentence_transformers import resolve_model_path

    return SentenceTransformer(resolve_model_path("all-MiniLM-L6-v2"), device="cpu")


Settings.embed_model = MiniLM()
Settings.llm = MockLLM(max_tokens=16)

QA_TEMPLATES = {
    "short": "Context:\n{context_str}\nAnswer the question from the context in one sentence.\nQuestion: {query_str}\n",
    "careful": "Context:\n{context_str}\nUse only the context; say you don't know if it is not there.\n"
               "Question: {query_str}\n",
}


@functools.cache
def index() -> VectorStoreIndex:
    documents = [Document(text=d["text"], metadata={"source": d["_id"]}) for d in corpus()]
    return VectorStoreIndex.from_documents(documents)


query = llamaindex_system(lambda params: index().as_query_engine(
    similarity_top_k=params["k"], text_qa_template=PromptTemplate(QA_TEMPLATES[params["prompt"]])), id_key="source")
chat = llamaindex_system(lambda params: index().as_chat_engine(
    chat_mode="context", similarity_top_k=params["k"], system_prompt=QA_TEMPLATES[params["prompt"]].split("\n")[2]),
    id_key="source")
