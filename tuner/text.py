"""Plain-text helpers shared by layers that must not import each other (chunking, the graded judge)."""

from __future__ import annotations

import re

#: whitespace after a sentence's end: . ! or ?, perhaps closed by a quote or bracket (kept with the sentence)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]])\s+")


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s]
