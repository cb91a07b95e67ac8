"""BEIR layout: corpus.jsonl {_id,title,text}, queries.jsonl {_id,text,...}, qrels.tsv or qrels/test.tsv."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

from tuner.data._base import Dataset, Document, Question
from tuner.data._io import as_text_list, decode, first_present, read_jsonl
from tuner.errors import DataError
from tuner.files import write_atomically

# fields that carry reference answers in BEIR-derived sets (SQuAD/CLAPNQ "answers", AutoRAG "generation_gt")
ANSWER_KEYS = ("answers", "answer", "ground_truth", "ground_truths", "reference", "generation_gt")


def looks_like(path: Path) -> bool:
    return path.is_dir() and (path / "corpus.jsonl").is_file()


def load(path: Path) -> Dataset:
    documents = [
        Document(id=str(row["_id"]), text=str(row.get("text", "")), title=str(row.get("title") or ""))
        for row in _rows_with_id(path / "corpus.jsonl")
    ]
    queries_file = path / "queries.jsonl"
    if not queries_file.is_file():  # a corpus only (what `tuner data ingest` writes): the caller decides
        return Dataset(name=path.name, format="beir", source=path, documents=documents, questions=[])
    qrels = _read_qrels(path)
    questions = []
    for row in _rows_with_id(queries_file):
        qid = str(row["_id"])
        relevant = qrels.get(qid) or _inline_gold(row)
        questions.append(
            Question(
                id=qid,
                text=str(row.get("text", "")),
                answers=tuple(as_text_list(first_present(row, *ANSWER_KEYS))),
                relevant_ids=frozenset(relevant),
                contexts=tuple(as_text_list(row.get("contexts"))),
                kind=str(row.get("kind") or ""),
            )
        )
    return Dataset(name=path.name, format="beir", source=path, documents=documents, questions=questions)


def _rows_with_id(path: Path):
    for number, row in enumerate(read_jsonl(path), 1):
        if "_id" not in row:
            raise DataError(f"{path}: row {number} has no '_id'")
        yield row


def _read_qrels(path: Path) -> dict[str, set[str]]:
    for candidate in (path / "qrels.tsv", path / "qrels" / "test.tsv"):
        if candidate.is_file():
            break
    else:
        return {}
    relevant: dict[str, set[str]] = defaultdict(set)
    text = decode(candidate, candidate.read_bytes())
    for number, fields in enumerate(csv.reader(text.splitlines(), delimiter="\t"), 1):
        if not fields or (number == 1 and not _is_number(fields[-1])):
            continue  # blank line or header
        if len(fields) < 3 or not _is_number(fields[2]):
            raise DataError(f"{candidate}: line {number}: expected 'query-id<TAB>corpus-id<TAB>score'")
        if float(fields[2]) > 0:
            relevant[fields[0]].add(fields[1])
    return relevant


def _inline_gold(row: dict) -> set[str]:
    """AutoRAG-style retrieval_gt ([[doc ids]]) when there is no qrels file."""
    return set(as_text_list(row.get("retrieval_gt")))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_questions(path: Path, questions: list[Question]) -> None:
    """queries.jsonl (with answers, kind and source passages) and qrels.tsv beside a corpus.jsonl."""
    rows = [{"_id": q.id, "text": q.text, "answers": list(q.answers), "kind": q.kind, "contexts": list(q.contexts)}
            for q in questions]
    write_atomically(path / "queries.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    qrels = ["query-id\tcorpus-id\tscore"] + [f"{q.id}\t{doc}\t1" for q in questions for doc in sorted(q.relevant_ids)]
    write_atomically(path / "qrels.tsv", "\n".join(qrels) + "\n")
