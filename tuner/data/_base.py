"""The shape every dataset loader produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tuner.cache import stable_hash


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    # reference answers, best first; empty when the data has none (e.g. unanswerable questions)
    answers: tuple[str, ...] = ()
    # ids of the documents that answer it; empty when the data has no gold ids
    relevant_ids: frozenset[str] = frozenset()
    # the passages the data gives with the question (RAGAS rows: what the reference was written from)
    contexts: tuple[str, ...] = ()
    #: a generated question's kind (single-hop, multi-hop, unanswerable); "" for questions people wrote
    kind: str = ""

    @property
    def reference(self) -> str | None:
        return self.answers[0] if self.answers else None


@dataclass
class Dataset:
    name: str
    format: str
    source: Path
    documents: list[Document]
    questions: list[Question]
    notes: list[str] = field(default_factory=list)

    @property
    def has_gold_ids(self) -> bool:
        return any(q.relevant_ids for q in self.questions)

    @property
    def has_references(self) -> bool:
        return any(q.answers for q in self.questions)

    def corpus_hash(self) -> str:
        """The documents' identity (ids, titles, texts): what an index built from them depends on."""
        return stable_hash(sorted((d.id, d.title, d.text) for d in self.documents))[:16]

    def identity(self) -> dict[str, int | str]:
        """What a study's numbers are measured on: its questions and documents, counted and hashed (ids and
        texts). A resume on other questions (another --limit, dataset or file) would mix means over other sets."""
        return {"questions": len(self.questions), "documents": len(self.documents),
                "hash": stable_hash([sorted((q.id, q.text) for q in self.questions),
                                     sorted((d.id, d.title, d.text) for d in self.documents)])[:16]}
