"""RAG chains written as LangChain's docs write them, over the demo corpus: the tutorial's LCEL chain that returns a
string, `create_retrieval_chain` and `RetrievalQA`. Nothing here is shaped for tuner: the last lines hand each
chain's builder to `langchain_system` as it is. The retriever is the user's own (BM25 over the corpus, each
Document's source in its metadata, as loaders set it); the chat model is LangChain's fake (the answer text does not
matter to these tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough

from tuner.systems.adapters import langchain_system

CORPUS = Path(os.environ.get("OWN_SYSTEM_CORPUS", Path(__file__).parents[1] / "tuner/data/demo/corpus.jsonl"))


class CorpusRetriever(BaseRetriever):
    """BM25 over the corpus; `k` documents, each with its source id in metadata."""

    k: int = 4

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        import bm25s

        docs = [json.loads(line) for line in CORPUS.read_text().splitlines() if line]
        index = bm25s.BM25()
        index.index(bm25s.tokenize([d["text"] for d in docs], show_progress=False), show_progress=False)
        found, _ = index.retrieve(bm25s.tokenize([query], show_progress=False), k=min(self.k, len(docs)),
                                  show_progress=False)
        return [Document(page_content=docs[int(i)]["text"], metadata={"source": docs[int(i)]["_id"]})
                for i in found[0]]


def format_docs(docs):
    return "\n\n".join(doc.page_content for doc in docs)


TEMPLATES = {
    "short": "Answer the question from the context in one sentence.\n\nContext: {context}\n\nQuestion: {question}",
    "careful": "Use only the context below; say you don't know if it is not there.\n\nContext: {context}\n\n"
               "Question: {question}",
}


def llm():
    return FakeListChatModel(responses=["The capital is Port Ardent."])


def lcel_chain(params):
    """The tutorial's chain: it returns a string."""
    retriever = CorpusRetriever(k=params["k"])
    prompt = ChatPromptTemplate.from_template(TEMPLATES[params["prompt"]])
    return ({"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm()
            | StrOutputParser())


def retrieval_chain(params):
    """`create_retrieval_chain`: it takes {"input": ...} and returns the answer and its context."""
    from langchain_classic.chains import create_retrieval_chain
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain

    prompt = ChatPromptTemplate.from_messages([("system", TEMPLATES[params["prompt"]].replace("{question}", "")),
                                               ("human", "{input}")])
    return create_retrieval_chain(CorpusRetriever(k=params["k"]), create_stuff_documents_chain(llm(), prompt))


def retrieval_qa(params):
    """The older `RetrievalQA`: it takes {"query": ...} and returns a result (no documents unless asked)."""
    from langchain_classic.chains import RetrievalQA

    return RetrievalQA.from_chain_type(llm=llm(), retriever=CorpusRetriever(k=params["k"]))


lcel = langchain_system(lcel_chain)
created = langchain_system(retrieval_chain)
qa = langchain_system(retrieval_qa)
