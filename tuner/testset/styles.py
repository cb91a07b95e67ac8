"""The forms a generated question takes. A set of only what-questions ranks one kind of need, and a set of questions
where people type search phrases ranks another: without anchors the five question styles are taken in turn; given
people's questions (`--anchor-questions`), the styles come in their shares and at their length, and a topic search is
written from as many documents as the people's searches are answered by (a search for a subject many documents
serve names what they share, not one document's rare words)."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence

from tuner.data import Question

#: what the generator is asked to write, per question style
STYLES = {"what": "a what, which, who or when question about one fact",
          "why": "a why question about a reason or cause the passage gives (or a what question if it gives none)",
          "how": "a how question about a method, process or amount the passage describes",
          "compare": "a question comparing two things the passage describes (or a what question if it describes one)",
          "yes-no": "a yes-or-no question (its answer says yes or no, then why)"}
#: a search phrase naming a subject, not a question: written by a prompt of its own, judged as a search is
TOPIC = "topic"
#: the styles taken in turn when no anchors say how the users ask: a RAG tool's users mostly ask questions
QUESTION_STYLES = ("what", "why", "how", "compare", "yes-no")
LENGTHS = ("short: at most 8 words", "one plain sentence")
#: the documents a topic search is written from, at most: a prompt of more passages than this is beyond a small
#: model's attention, and three already name a subject rather than a document
WIDEST = 3

_FIRST = {**dict.fromkeys("what which who whom whose when where name list".split(), "what"), "why": "why",
          "how": "how", **dict.fromkeys("is are was were do does did can could should would will has have had "
                                        "may might must".split(), "yes-no")}
_COMPARE = re.compile(r"\b(?:differ\w*|compar\w*|vs\.?|versus|better than|worse than)\b", re.I)


def style_of(text: str) -> str:
    """The style a person's question has, read from its words: a comparison cue, else its first word, else (no
    question word and no question mark) a topic search."""
    if _COMPARE.search(text):
        return "compare"
    words = re.findall(r"[a-z']+", text.lower())
    if words and words[0] in _FIRST:
        return _FIRST[words[0]]
    return "what" if text.rstrip().endswith("?") else TOPIC


class StyleMix:
    """Turn -> (style, length). `counts`: how many of each style people wrote (empty: QUESTION_STYLES in turn, both
    LENGTHS); the turns follow those shares as closely as any prefix can, at the people's median length. `breadth`:
    the documents a topic search is written from (the people's median of documents answering one, up to WIDEST)."""

    def __init__(self, counts: Counter | None = None, median_words: int | None = None, breadth: int = 1):
        self.counts = Counter({s: n for s, n in (counts or {}).items() if n > 0})
        self.lengths = (f"about {median_words} words",) if median_words else LENGTHS
        self.breadth = max(1, min(breadth, WIDEST))
        self.order: list[str] = []

    @classmethod
    def of(cls, questions: Sequence[Question]) -> StyleMix:
        if not questions:
            return cls()
        return cls(Counter(style_of(q.text) for q in questions),
                    round(statistics.median(len(q.text.split()) for q in questions)),
                    round(statistics.median(len(q.relevant_ids) for q in questions)))

    def __call__(self, turn: int) -> tuple[str, str]:
        if not self.counts:
            styles = len(QUESTION_STYLES)
            return QUESTION_STYLES[turn % styles], self.lengths[turn // styles % len(self.lengths)]
        total = sum(self.counts.values())
        while len(self.order) <= turn:  # the style furthest behind its share so far (ties: the commoner style)
            made = Counter(self.order)
            step = len(self.order) + 1
            self.order.append(max(self.counts, key=lambda s: (self.counts[s] * step / total - made[s], self.counts[s])))
        return self.order[turn], self.lengths[turn % len(self.lengths)]

    def describe(self) -> str:
        if not self.counts:
            return "question styles in turn"
        shares = ", ".join(f"{s} {n}" for s, n in self.counts.most_common())
        broad = f", topic searches from {self.breadth} documents" if self.breadth > 1 and TOPIC in self.counts else ""
        return f"the anchors' styles ({shares}) at {self.lengths[0]}{broad}"
