"""The text gates a written question passes before any judge reads it: what the users of other generators complain
of — model preambles and lists turned into questions, questions that only make sense beside their passage,
duplicates. Each returns the cleaned text or raises Rejected naming the gate, so the scorecard counts every one."""

from __future__ import annotations

import json
import re

import numpy as np

from tuner.text import json_candidates

#: the scorecard's names of the gates, in the order a candidate meets them
GATES = ("unparsable", "preamble or list", "not standalone", "length", "copies its source", "near-duplicate",
         "unsupported by its source", "one document suffices", "answered by the corpus")
#: a question this similar to a kept one (cosine of their embeddings) is the same question
DUPLICATE_COSINE = 0.9
#: words a question may have
FEWEST_WORDS, MOST_WORDS = 3, 40

# "Here is a question:", "Sure! Question 1:", "Q:" — what a small model writes before the question itself
_PREAMBLE = re.compile(r"^\s*(?:(?:sure|okay|ok|certainly)[!,.]?\s*)?(?:here(?:'s| is| are)\b[^:\n]*:\s*)?"
                       r"(?:(?:question|q)\s*\d*\s*[:.)-]\s*)?(?:\d+\s*[.)]\s+|[-*•]\s+)?", re.I)
# the words of a question that leans on a text its reader never sees
_DEICTIC = re.compile(r"\b(?:the|this|that|these|above|given|provided|following) (?:passage|text|context|document|"
                      r"article|excerpt|paragraph|chunk|section|snippet|source|author)s?\b|\baccording to\b|"
                      r"\bmentioned (?:above|here|in)\b|\bin (?:the|this) (?:passage|text|excerpt)\b|"
                      # a question about the document itself, not about what it tells
                      r"\b(?:main )?(?:subject|topic|main idea|title|summary) of (?:the|this) \w+\s*\?", re.I)


class OverlapGate:
    """Holds the kept questions' mean lexical overlap with their sources to `target`: a question over it passes only
    while the set's mean stays at or under it, so a set may hold some close-worded questions (as people's do) but
    not lean on its sources' words."""

    def __init__(self, target: float):
        self.target, self.total, self.kept = target, 0.0, 0

    def passes(self, overlap: float) -> bool:
        return overlap <= self.target or (self.total + overlap) / (self.kept + 1) <= self.target

    def keep(self, overlap: float) -> None:
        self.total += overlap
        self.kept += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.kept if self.kept else None


class Rejected(Exception):
    """A candidate that failed a gate; `gate` is one of GATES."""

    def __init__(self, gate: str, detail: str = ""):
        assert gate in GATES, gate
        super().__init__(f"{gate}: {detail}" if detail else gate)
        self.gate = gate


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse_reply(text: str, fields: tuple[str, ...]) -> dict[str, str]:
    """The JSON object a generator was asked for (the first {...} in the reply when it wrapped it in prose), with
    each of `fields` a non-empty string."""
    data = next((found for candidate in json_candidates(text) if isinstance(found := _loads(candidate), dict)), None)
    if data is None:
        raise Rejected("unparsable", text[:60])
    values = {f: " ".join(str(data.get(f) or "").split()) for f in fields}
    if not all(values.values()):
        raise Rejected("unparsable", f"no {next(f for f, v in values.items() if not v)}")
    return values


def clean_question(text: str, subjects: tuple[str, ...] = (), search: bool = False) -> str:
    """One standalone question of sensible length, its preamble stripped; Rejected otherwise. With `subjects` (the
    titles of its source documents, the words of its source few other chunks use) the question must also name
    something: a word of a subject, a name or a number — "What is the name of the airport?" asks a reader who never
    saw the passage to guess which airport. A `search` (a topic search's phrase) ends with no question mark."""
    lines = [line for line in (_PREAMBLE.sub("", line).strip() for line in text.strip().splitlines()) if line]
    if not lines:  # nothing, or nothing but a preamble ("Here are three questions about X:")
        raise Rejected("preamble or list" if text.strip() else "length", text[:60])
    question = " ".join(lines)
    if len(lines) > 1 and sum(line.endswith("?") for line in lines) > 1 or question.count("?") > 1:
        raise Rejected("preamble or list", question[:60])
    if question.endswith(":"):  # "Here are three questions about X:" with nothing after it
        raise Rejected("preamble or list", question[:60])
    if _DEICTIC.search(question):
        raise Rejected("not standalone", question[:60])
    words = len(question.split())
    if not FEWEST_WORDS <= words <= MOST_WORDS:
        raise Rejected("length", f"{words} words")
    if subjects and not names_something(question, subjects):
        raise Rejected("not standalone", f"names no subject: {question[:50]}")
    if search:
        return question.rstrip("?.")
    return question if question.endswith("?") else question.rstrip(".") + "?"


def names_something(question: str, subjects: tuple[str, ...]) -> bool:
    """A capitalised word after the first, a number, or a word (4+ letters, plural or not) of one of `subjects`."""
    words = re.findall(r"[\w'-]+", question)
    if any(w[0].isupper() for w in words[1:]) or any(any(ch.isdigit() for ch in w) for w in words):
        return True
    stem = lambda word: word.lower().removesuffix("s")  # noqa: E731
    named = {stem(w) for subject in subjects for w in re.findall(r"\w{4,}", subject)}
    return any(stem(w) in named for w in words)


def check_new(vector: np.ndarray, kept: list[np.ndarray]) -> None:
    """Rejected when `vector` (unit length) is within DUPLICATE_COSINE of a kept question's."""
    if kept:
        similarity = float(np.max(np.stack(kept) @ vector))
        if similarity >= DUPLICATE_COSINE:
            raise Rejected("near-duplicate", f"cosine {similarity:.2f}")
