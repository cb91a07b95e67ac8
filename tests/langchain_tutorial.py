"""RAG code written as LangChain's docs write it: the tutorial's LCEL chain that returns a string, its agent whose tool
searches and returns the documents it found as the tool's artifact, `create_retrieval_chain` and `RetrievalQA`.
Nothing here is shaped for tuner: the last lines hand each builder to `langchain_system` as it is. The retriever is
the user's own (BM25 over the corpus, each Document's source in its metadata, as loaders set it). The chat model is
OpenAI's, as the tutorial configures it, where OPENAI_BASE_URL names an endpoint (a local OpenAI-compatible server in
the tests); elsewhere LangChain's fakes (the answer text does not matter to an id target)."""

from __future__ import annotations

import os

from corpus_bm25 import search
from langchain.agents import create_agent
from langchain.tools import tool
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough

from tuner.systems.adapters import langchain_system

ANSWER = "The capital is Port Ardent."


class CorpusRetriever(BaseRetriever):
    """BM25 over the corpus; `k` documents, each with its source id in metadata."""

    k: int = 4

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return store.similarity_search(query, self.k)


class Store:
    """The user's document store: its search is not a LangChain retriever (nor is the tutorial's vector store's)."""

    def similarity_search(self, query: str, k: int) -> list[Document]:
        return [Document(page_content=d["text"], metadata={"source": d["_id"]}) for d in search(query, k)]


store = Store()


def format_docs(docs):
    return "\n\n".join(doc.page_content for doc in docs)


TEMPLATES = {
    "short": "Answer the question from the context in one sentence.\n\nContext: {context}\n\nQuestion: {question}",
    "careful": "Use only the context below; say you don't know if it is not there.\n\nContext: {context}\n\n"
               "Question: {question}",
}


class ToolCallingFake(BaseChatModel):
    """Stands in for a tool-calling chat model: asked a question, it calls the search tool with it; given the tool's
    result, it answers."""

    @property
    def _llm_type(self) -> str:
        return "tool-calling-fake"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "retrieve_context", "args": {"query": messages[-1].content}, "id": "call-1"}
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="", tool_calls=[call]))])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=ANSWER))])

    def bind_tools(self, tools, **kwargs):
        return self


def llm(tools: bool = False):
    if os.environ.get("OPENAI_BASE_URL"):
        from langchain.chat_models import init_chat_model

        return init_chat_model("gpt-4o-mini", model_provider="openai", temperature=0, max_tokens=64)
    return ToolCallingFake() if tools else FakeListChatModel(responses=[ANSWER])


def lcel_chain(params):
    """The tutorial's chain: it returns a string."""
    retriever = CorpusRetriever(k=params["k"])
    prompt = ChatPromptTemplate.from_template(TEMPLATES[params["prompt"]])
    return ({"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm()
            | StrOutputParser())


def rag_agent(params):
    """The tutorial's agent: a tool that searches the store and returns what it found as content and artifact."""

    @tool(response_format="content_and_artifact")
    def retrieve_context(query: str):
        """Retrieve information to help answer a query."""
        retrieved_docs = store.similarity_search(query, k=params["k"])
        serialized = "\n\n".join(f"Source: {doc.metadata}\nContent: {doc.page_content}" for doc in retrieved_docs)
        return serialized, retrieved_docs

    prompt = TEMPLATES[params["prompt"]].split("\n\n")[0] + " Use the tool to find the context."
    return create_agent(llm(tools=True), [retrieve_context], system_prompt=prompt)


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
agent = langchain_system(rag_agent)
created = langchain_system(retrieval_chain)
qa = langchain_system(retrieval_qa)
