"""Plain-text helpers shared by layers that must not import each other (chunking, the graded judge)."""

from __future__ import annotations

import re

#: whitespace after a sentence's end: . ! or ?, perhaps closed by a quote or bracket (kept with the sentence)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s]


def number_contexts(contexts: list[str]) -> str:
    """The passages as the answer prompt shows them, numbered for its citations: "[1] ...", one per line."""
    return "\n".join(f"[{i}] {text}" for i, text in enumerate(contexts, start=1))


#: what the judge's verdict prompt and the answer prompt laid out `context-first` both begin with, before the
#: numbered passages: one model doing both computes a question's passages once (`answer_layout`)
CONTEXT_HEADING = "Context:\n"


#: the words of one chunk of evidence a claim is checked against (about 400 tokens: MiniCheck's chunk for its small
#: models): `verdict_contexts: chunks`, and a classifier checker's default
CHUNK_WORDS = 300


def word_chunks(passages: list[str], most: int) -> list[str]:
    """The passages packed in order into chunks of at most `most` words, split between sentences (a sentence longer
    than a chunk between words); short passages share a chunk, a long one spans several. MiniCheck's reading of
    long evidence: a claim is checked against each chunk, and the best verdict stands."""
    pieces = [words[at:at + most] for passage in passages for sentence in sentences(passage)
              for words in [sentence.split()] for at in range(0, len(words), most)]
    chunks: list[list[str]] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + len(piece) <= most:
            chunks[-1].extend(piece)
        else:
            chunks.append(list(piece))
    return [" ".join(chunk) for chunk in chunks] or [""]


#: the outermost {...} of a reply that wrapped its JSON object in prose or code fences
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


def json_candidates(reply: str) -> list[str]:
    """Where an LLM's JSON object may be in its reply, most likely first: the whole reply, then its outermost
    {...} (prose or code fences around it)."""
    candidates = [reply.strip()]
    found = _JSON_OBJECT.search(reply)
    if found and found.group(0) != candidates[0]:
        candidates.append(found.group(0))
    return candidates
