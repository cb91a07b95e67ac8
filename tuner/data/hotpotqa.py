"""HotpotQA distractor json: a list of {_id, question, answer, supporting_facts, context:[[title, sentences]]}.
Every context paragraph becomes a document (id = its title); supporting-fact titles are the gold ids."""

from __future__ import annotations

from pathlib import Path

from tuner.data._base import Dataset, Document, Question
from tuner.data._io import read_json
from tuner.errors import DataError


def looks_like(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    data = read_json(path)
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "supporting_facts" in data[0]


def load(path: Path) -> Dataset:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: HotpotQA data must be a JSON list of questions")
    documents: dict[str, Document] = {}
    questions = []
    for number, row in enumerate(data, 1):
        try:
            for title, sentences in row["context"]:
                text = " ".join(s.strip() for s in sentences)
                documents.setdefault(title, Document(id=title, title=title, text=text))
            gold = frozenset(title for title, _ in row["supporting_facts"])
            questions.append(
                Question(
                    id=str(row.get("_id", f"q{number}")),
                    text=row["question"],
                    answers=(row["answer"],) if row.get("answer") else (),
                    relevant_ids=gold,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: question {number} is not in HotpotQA form ({exc!r})") from None
    return Dataset(name=path.stem, format="hotpotqa", source=path, documents=list(documents.values()),
                   questions=questions)
