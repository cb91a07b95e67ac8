"""Contextual chunks written by an LLM (Anthropic's contextual retrieval): one call per chunk, the model reading the
chunk's document and writing a sentence or two that situate the chunk in it, put before the chunk for BM25 and the
embedder alike. Calls go through the caller's LLM, so they are cached and counted like every other call."""

from __future__ import annotations

from collections.abc import Callable

from tuner.data import Document
from tuner.models.llms import LLM, PromptTooLong

#: characters of the document the model reads: a long document is cut so the prompt fits a small model's window
DOCUMENT_CHARS = 6000
#: tokens the situating sentence may take
SITUATE_TOKENS = 80

#: (document, chunk text) -> the sentence that situates the chunk ("" when the model wrote none)
Situate = Callable[[Document, str], str]


def situating(llm: LLM) -> Situate:
    def situate(document: Document, chunk: str) -> str:
        text = document.text if len(document.text) <= DOCUMENT_CHARS else document.text[:DOCUMENT_CHARS] + " …"
        prompt = (f"<document>\n{document.title}\n{text}\n</document>\nHere is the chunk we want to situate within "
                  f"the whole document\n<chunk>\n{chunk}\n</chunk>\nPlease give a short succinct context (one or two "
                  f"sentences) to situate this chunk within the overall document for the purposes of improving "
                  f"search retrieval of the chunk. Answer only with the succinct context and nothing else.")
        try:
            reply = llm.chat([{"role": "user", "content": prompt}], max_tokens=SITUATE_TOKENS).text
        except PromptTooLong:  # the chunk keeps its title line instead
            return ""
        return " ".join(reply.split())

    return situate
