"""Plain-text helpers shared by layers that must not import each other (chunking, the graded judge)."""

from __future__ import annotations

import re

#: whitespace after a sentence's end: . ! or ?, perhaps closed by a quote or bracket (kept with the sentence)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s]


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
