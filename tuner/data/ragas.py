"""RAGAS-style question sets: rows of question, reference answer and contexts (jsonl, a json list of rows,
or a json dict of columns). The corpus is built from the contexts, deduplicated."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tuner.data._base import Dataset, Document, Question
from tuner.data._io import as_text_list, first_present, read_json, read_jsonl
from tuner.errors import DataError

QUESTION_KEYS = ("question", "user_input", "query")
# "answer" in RAGAS data is the generated answer under test, never the reference
REFERENCE_KEYS = ("ground_truth", "ground_truths", "reference", "references")
CONTEXT_KEYS = ("contexts", "context", "retrieved_contexts", "reference_contexts")


def looks_like(path: Path) -> bool:
    if path.suffix == ".jsonl":
        first = next(read_jsonl(path), {})
        return first_present(first, *QUESTION_KEYS) is not None
    if path.suffix == ".json":
        data = read_json(path)
        if isinstance(data, dict):
            return any(isinstance(data.get(k), list) for k in QUESTION_KEYS)
        return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and (
            first_present(data[0], *QUESTION_KEYS) is not None and "supporting_facts" not in data[0]
        )
    return False


def load(path: Path) -> Dataset:
    rows = _rows(path)
    documents: dict[str, Document] = {}
    questions = []
    for number, row in enumerate(rows, 1):
        text = first_present(row, *QUESTION_KEYS)
        if text is None:
            raise DataError(f"{path}: row {number} has no question (expected one of {', '.join(QUESTION_KEYS)})")
        contexts = as_text_list(first_present(row, *CONTEXT_KEYS))
        for context in contexts:
            doc_id = context_id(context)
            documents.setdefault(doc_id, Document(id=doc_id, text=context))
        questions.append(
            Question(
                id=str(row.get("id") or row.get("_id") or f"q{number}"),
                text=str(text),
                answers=tuple(as_text_list(first_present(row, *REFERENCE_KEYS))),
                contexts=tuple(contexts),
            )
        )
    notes = ["RAGAS-style data has no gold document ids: retrieval metrics are not computed"]
    return Dataset(
        name=path.stem, format="ragas", source=path, documents=list(documents.values()), questions=questions,
        notes=notes
    )


def context_id(text: str) -> str:
    """Stable id for a context passage: the same text in two rows is one document."""
    return "ctx-" + hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:12]


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return list(read_jsonl(path))
    data = read_json(path)
    if isinstance(data, list):
        return data
    if isinstance(data, dict):  # columns: {"question": [...], "contexts": [[...]], ...}
        columns = {k: v for k, v in data.items() if isinstance(v, list)}
        length = len(next(iter(columns.values()), []))
        if any(len(v) != length for v in columns.values()):
            raise DataError(f"{path}: column lists have different lengths")
        return [{k: v[i] for k, v in columns.items()} for i in range(length)]
    raise DataError(f"{path}: expected a list of rows or a dict of columns")
