"""Human labels of answers: what a person said of an answer's faithfulness, kept beside the study that produced it.

A label belongs to an answer, not to a trial: its key is the fingerprint of (question id, answer, contexts), so
every trial — and every `tuner compare` run — that gave the same answer on the same contexts shares it. Each line
carries the texts it judged too, so a labels file stands alone (`tuner judge check --labels` scores it with any
judge). One JSON line per label, appended and flushed as it is given (a kill loses nothing already said), in the
study's documents: `studies/NAME/labels.jsonl`, or the database of a study kept in one, where every worker sees
them (`StudyFolder.labels`); the last label of an answer wins, so a relabel is an append too. Teams that label elsewhere
import CSV or JSONL rows naming the answer by `key` (as `tuner judge label --export` writes it) or by `trial` and
`question`.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tuner.errors import DataError
from tuner.evaluation.records import QuestionResult
from tuner.files import append_json_line, read_json_lines, refuse_special

LABELS_FILE = "labels.jsonl"
#: what a label measures: the human counterpart of this judge metric
LABELLED_METRIC = "faithfulness"
VERDICTS = {"y": True, "yes": True, "true": True, "1": True, "supported": True,
            "n": False, "no": False, "false": False, "0": False, "unsupported": False,
            "s": None, "skip": None, "skipped": None}


def fingerprint(result: QuestionResult) -> str:
    """The answer's identity: the same words on the same contexts for the same question."""
    body = json.dumps([result.id, result.answer, list(result.contexts)], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True)
class Label:
    key: str  # the answer's fingerprint
    question_id: str
    supported: bool | None  # None: skipped (the person could not tell)
    trial: int | None  # the trial whose answer was shown (any trial with the same answer shares the label)
    question: str
    answer: str
    contexts: tuple[str, ...]

    @classmethod
    def of(cls, result: QuestionResult, supported: bool | None, trial: int | None = None) -> Label:
        return cls(fingerprint(result), result.id, supported, trial, result.question, result.answer, result.contexts)

    @property
    def value(self) -> float | None:
        """1 supported, 0 not, None skipped: what the judge's faithfulness estimates."""
        return None if self.supported is None else float(self.supported)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "contexts": list(self.contexts)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> Label:
        try:
            return cls(str(data["key"]), str(data["question_id"]), verdict(data["supported"]),
                       None if data.get("trial") is None else int(data["trial"]), str(data.get("question", "")),
                       str(data.get("answer", "")), tuple(data.get("contexts", ())))
        except (KeyError, ValueError, TypeError) as exc:
            raise DataError(f"{where}: not a label ({type(exc).__name__}: {exc})") from None


def verdict(value: Any) -> bool | None:
    """y/n/s and their spellings (true/false, 1/0, yes/no, supported/unsupported, skip)."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in VERDICTS:
        raise ValueError(f"supported must be y, n or s, not {value!r}")
    return VERDICTS[text]


def append(path: Path, label: Label) -> None:
    """One label at the end of a labels file, on the disk before this returns."""
    append_json_line(path, label.to_json())


def read(path: Path) -> dict[str, Label]:
    """The labels of a labels file (a study's, or one given with --labels), the last one per answer (skips
    included: `supported` None); a torn last line (a kill mid-write) is left out."""
    return labels_of(read_json_lines(path), str(path))


def labels_of(rows: Sequence[tuple[int, Any]], where: str) -> dict[str, Label]:
    """(line number, row) pairs as labels, the last one per answer; `where` names them in an error."""
    labels: dict[str, Label] = {}
    for number, row in rows:
        label = Label.from_json(row, f"{where}:{number}")
        labels[label.key] = label
    return labels


def given(labels: Mapping[str, Label]) -> dict[str, Label]:
    """The labels that say something (skips left out)."""
    return {key: label for key, label in labels.items() if label.supported is not None}


#: an answer a row names: (key) or (trial, question id) -> (trial, its result), None when the study has no such answer
Resolve = Callable[[str | None, int | None, str | None], "tuple[int, QuestionResult] | None"]


def import_labels(source: Path, resolve: Resolve) -> list[Label]:
    """Every label of a CSV (header with key or trial,question; and supported) or JSONL file (rows with an empty
    `supported` are not labelled yet and left out). Each row is checked before any is returned: a bad row is a
    DataError, and nothing is recorded."""
    refuse_special(source)
    if not source.is_file():
        raise DataError(f"{source}: no such file")
    try:
        if source.suffix.lower() == ".csv":
            with source.open(encoding="utf-8", newline="") as handle:
                rows = [(f"{source}:{i + 2}", row) for i, row in enumerate(csv.DictReader(handle))]
        else:
            rows = [(f"{source}:{i + 1}", json.loads(line))
                    for i, line in enumerate(source.read_text(encoding="utf-8").splitlines()) if line.strip()]
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error) as exc:
        raise DataError(f"{source}: unreadable ({exc})") from None
    columns = {str(column) for _, row in rows if isinstance(row, dict) for column in row}
    named = "key" in columns or "trial" in columns and columns & {"question_id", "question"}
    if rows and not ("supported" in columns and named):
        raise DataError(f"{source}: expected the columns key (or trial and question_id) and supported, found "
                        f"{', '.join(sorted(columns)) or 'none'}")
    labels = []
    for where, row in rows:
        if str(row.get("supported") or "").strip() == "":
            continue  # a row not labelled yet (an exported file half filled): no verdict, not a skip
        try:
            supported = verdict(row.get("supported"))
            trial = row.get("trial")
            trial = None if trial in (None, "") else int(trial)
        except (ValueError, TypeError, AttributeError) as exc:
            raise DataError(f"{where}: {exc}") from None
        question = row.get("question_id") or row.get("question")
        found = resolve(row.get("key") or None, trial, question)
        if found is None:
            raise DataError(f"{where}: names no answer of this study (give key, or trial and question_id)")
        labels.append(Label.of(found[1], supported, found[0]))
    return labels
