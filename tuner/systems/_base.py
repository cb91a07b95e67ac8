"""The contract of the user's own system: given a question and a trial's knobs, the answer and the contexts used.

One JSON shape for every kind (a Python function returns it, an HTTP endpoint answers it):

    asked:   {"question": {"id": "q1", "text": "..."}, "params": {"k": 4, "prompt": "short"}}
    replied: {"answer": "...", "contexts": [{"text": "...", "id": "doc-7"}, "a context without an id", ...],
              "usage": {"prompt_tokens": 812, "completion_tokens": 64}}      # usage: optional

A system with `answers: false` may leave out `answer`. A context's `id` is the document id the dataset's qrels
name, where the system has one: id metrics read them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.errors import BAD_INPUT, Outage, TunerError, first_line


class BadReply(TunerError):
    """What the system returned for one question is no reply (not JSON, no answer, a context that is not text), or
    the call raised or timed out: that question fails, the trial goes on."""


class BadShape(BadReply):
    """The reply is not of a shape tuner reads (not a JSON object, a field missing or of another type): unlike a
    call that raised or timed out, every reply of the system is likely to fail the same way. The user's to fix, so
    every command that meets it exits 2."""

    exit_code = BAD_INPUT


class Rejected(TunerError):
    """The system refused the trial's knobs (HTTP 400/422, or a Python system raising `Rejected`): no question of
    this configuration can be answered, so the trial fails and the study goes on.

    A Python system raises it itself: `raise tuner.systems.Rejected("k must be at most 20")`. The space's or the
    defaults' to fix, so every command that meets it exits 2 (a study goes on past a refused trial)."""

    exit_code = BAD_INPUT


class Unreachable(Outage):
    """The system cannot be reached (nothing listens, a 5xx that outlasts the retries): not the configuration's
    fault, so the trial is marked interrupted and a resume runs it again."""


@dataclass(frozen=True)
class Context:
    text: str
    #: the document id, where the system has one
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    answer: str | None
    contexts: tuple[Context, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: where a framework adapter found the contexts (`tuner system check` says it): an optional reply field
    contexts_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"answer": self.answer, "contexts": [{"text": c.text, "id": c.id} for c in self.contexts],
                "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
                **({"contexts_from": self.contexts_from} if self.contexts_from else {})}

    @classmethod
    def parse(cls, data: Any, answers: bool = True) -> Reply:
        """A reply checked field by field; BadShape says what is wrong with it in one line."""
        if not isinstance(data, Mapping):
            raise BadShape(f"the reply is {type(data).__name__}, not a JSON object with answer and contexts")
        if "contexts" not in data:
            raise BadShape(f"the reply lacks 'contexts' (it has {', '.join(map(repr, data)) or 'no key'})")
        answer = data.get("answer")
        if answers and answer is None and "answer" in data:
            # an adapter says where it looked (`answer_from`), as it says where it found the contexts
            looked = f" ({data['answer_from']})" if isinstance(data.get("answer_from"), str) else ""
            raise BadShape(f"the reply's answer is null{looked}, not text; a system that retrieves only is "
                           f"configured with answers: false")
        if answers and answer is None:
            raise BadShape(f"the reply lacks 'answer' (it has {', '.join(map(repr, data))}); a system that "
                           f"retrieves only is configured with answers: false")
        if answer is not None and not isinstance(answer, str):
            raise BadShape(f"the reply's answer is {type(answer).__name__}, not text")
        if not isinstance(data["contexts"], list):
            raise BadShape(f"the reply's contexts are {type(data['contexts']).__name__}, not a list")
        contexts = []
        for number, item in enumerate(data["contexts"], 1):
            text, doc = (item.get("text"), item.get("id")) if isinstance(item, Mapping) else (item, None)
            if not isinstance(text, str):
                raise BadShape(f"context {number} of the reply is {type(text).__name__}, not text" +
                               (" (a context is text, or an object with text and id)" if not
                                isinstance(item, Mapping) else ""))
            contexts.append(Context(text, None if doc is None else str(doc)))
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        origin = data.get("contexts_from")
        return cls(answer, tuple(contexts), _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")),
                   origin if isinstance(origin, str) else None)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class System(ABC):
    """One kind of system (a Python function, an HTTP endpoint). `name` is what its replies are cached under."""

    name: str

    @abstractmethod
    def ask(self, question: Mapping[str, str], params: Mapping[str, Any]) -> Any:
        """The raw reply to `question` ({"id", "text"}) under `params` (checked by `Reply.parse`). Raises BadReply
        for a call that failed on this question, Rejected for knobs the system refuses, Unreachable when it cannot
        be reached at all."""

    def unreachable(self) -> str | None:
        """Why the system cannot answer at all (before the first question); None when it can."""
        return None

    def close(self) -> None:
        """Let go of connections."""


def raised(exc: BaseException) -> str:
    """'the system raised TypeError: message' in one line."""
    return f"the system raised {type(exc).__name__}: {first_line(exc)}"
