"""A deterministic search / held-out split of a dataset's questions, by hash of question id.

The questions are ordered by a salted SHA-256 of their id and the first `round(fraction * n)` are held out, so
the split depends on nothing but the ids (not on file order, not on a seed) and holds out exactly the share
asked for. A study records its split (the held-out ids): trials, pruning and the sampler see only the search
questions, and the verdict on the best configuration is given on the held-out ones, which the search never saw.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.data._base import Question
from tuner.errors import ConfigError

#: questions a dataset needs before a study holds some out by default
AUTO_MIN_QUESTIONS = 20
DEFAULT_FRACTION = 0.3
SALT = b"tuner-holdout-v1:"


def _rank(question_id: str) -> bytes:
    return hashlib.sha256(SALT + question_id.encode("utf-8")).digest()


@dataclass(frozen=True)
class Split:
    fraction: float
    holdout_ids: frozenset[str]

    @classmethod
    def make(cls, ids: Iterable[str], fraction: float, option: str = "--holdout") -> Split:
        """Hold out `fraction` of the questions: the ones whose id hashes lowest. 0 holds out nothing. `option`:
        what the user typed the fraction as, for the error."""
        ids = list(dict.fromkeys(ids))
        if not 0 <= fraction < 1:
            raise ConfigError(f"{option} {fraction:g}: expected a share of the questions in [0, 1), e.g. 0.3")
        count = round(fraction * len(ids))
        if fraction and (count < 1 or count >= len(ids)):
            raise ConfigError(f"{option} {fraction:g} of {len(ids)} question(s) leaves no question on one side; "
                              f"use more questions or {option} 0")
        return cls(fraction, frozenset(sorted(ids, key=_rank)[:count]))

    @classmethod
    def auto(cls, ids: Sequence[str], fraction: float | None) -> Split:
        """`fraction` as given; None: 0.3 when there are at least 20 questions, else no held-out part."""
        if fraction is None:
            fraction = DEFAULT_FRACTION if len(set(ids)) >= AUTO_MIN_QUESTIONS else 0.0
        return cls.make(ids, fraction)

    @property
    def active(self) -> bool:
        return bool(self.holdout_ids)

    def search(self, questions: Sequence[Question]) -> list[Question]:
        return [q for q in questions if q.id not in self.holdout_ids]

    def holdout(self, questions: Sequence[Question]) -> list[Question]:
        return [q for q in questions if q.id in self.holdout_ids]

    def part(self, questions: Sequence[Question], name: str) -> list[Question]:
        """`search`, `holdout` or `all` of the questions."""
        if name == "all":
            return list(questions)
        if name not in ("search", "holdout"):
            raise ConfigError(f"--split {name!r}: choose search, holdout or all")
        return self.search(questions) if name == "search" else self.holdout(questions)

    def to_json(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "holdout_ids": sorted(self.holdout_ids)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Split:
        """A recorded split; a study recorded before splits existed held nothing out."""
        if not data:
            return cls(0.0, frozenset())
        return cls(float(data["fraction"]), frozenset(data["holdout_ids"]))
