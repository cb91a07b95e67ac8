"""A checker with no model and no call: the share of a claim's words, or of its facts (numbers and names), that the
passages hold. It is instant and free, so it screens a study's configurations where the judge would take hours, and
it is a floor to measure a judge against; it cannot tell a paraphrase from a contradiction (docs/performance.md
gives its agreement with people's labels)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bm25s.stopwords import STOPWORDS_EN

from tuner.metrics.checkers import Checker

_TOKEN = re.compile(r"\w+(?:[.,]\d+)*")
_STOPWORDS = frozenset(STOPWORDS_EN)


def held_shares(contexts: Sequence[str], statements: Sequence[str], lexical: str) -> list[float]:
    """Per statement, the share of what must be found (`lexical`: words, its content words; facts, its numbers and
    names) that the passages hold; a statement with nothing to find is held whole."""
    held = {token.lower() for token in _TOKEN.findall("\n".join(contexts))}
    shares = []
    for statement in statements:
        found = units(statement, lexical)
        shares.append(sum(unit in held for unit in found) / len(found) if found else 1.0)
    return shares


def units(statement: str, lexical: str) -> list[str]:
    """What must be found: its content words (stopwords left out), or its numbers and names (a name: a capitalised
    word after the first)."""
    tokens = _TOKEN.findall(statement)
    if lexical == "facts":
        tokens = [t for n, t in enumerate(tokens) if any(c.isdigit() for c in t) or (n and t[0].isupper())]
    return [t.lower() for t in tokens if t.lower() not in _STOPWORDS]


class LexicalChecker(Checker):
    def __init__(self, config):
        self.config = config

    @property
    def name(self) -> str:
        return self.config.identity

    def supported(self, contexts: Sequence[str], statements: Sequence[str]) -> list[float]:
        return held_shares(contexts, statements, self.config.lexical)
