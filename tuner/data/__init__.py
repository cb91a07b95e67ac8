"""Dataset loading: BEIR folders, RAGAS-style jsonl/json, HotpotQA distractor json, and the bundled demo."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tuner.data import beir, hotpotqa, ragas
from tuner.data._base import Dataset, Document, Question
from tuner.errors import DataError

__all__ = ["Dataset", "Document", "Question", "load_dataset", "DEMO_PATH", "FORMATS"]

DEMO_PATH = Path(__file__).parent / "demo"
FORMATS = {"beir": beir, "ragas": ragas, "hotpotqa": hotpotqa}
DATA_SUFFIXES = (".jsonl", ".json")


def load_dataset(path: Path | str | None = None, format: str = "auto", limit: int | None = None,
                 require_questions: bool = True) -> Dataset:
    """Load a dataset (the bundled demo when no path is given), detect its format, check it is usable: with
    questions, unless `require_questions` is False (a corpus that `tuner data generate` will write them for)."""
    path = Path(path) if path is not None else DEMO_PATH
    if not path.exists():
        raise DataError(f"{path}: dataset not found")
    if format == "auto":
        path, format = _detect(path)
    elif format != "beir" and path.is_dir():
        path = _data_file_in(path)
    dataset = FORMATS[format].load(path)
    if path == DEMO_PATH:
        dataset.name = "demo"
    _check(dataset, path, require_questions)
    if limit is not None:
        dataset.questions = dataset.questions[:limit]
    return dataset


def _check(dataset: Dataset, path: Path, require_questions: bool = True) -> None:
    """Refuse what cannot be scored right; note (and leave out) what would quietly skew the figures."""
    counts = Counter(d.id for d in dataset.documents)
    repeated = [i for i, n in counts.items() if n > 1]
    if repeated:
        raise DataError(f"{path}: document id {repeated[0]!r} appears {counts[repeated[0]]} times ({len(repeated)} "
                        f"ids repeat): ids must be unique, or gold ids and chunk names are ambiguous")
    blank = [d.id for d in dataset.documents if not d.text.strip()]
    if len(blank) == len(dataset.documents):
        raise DataError(f"{path}: the corpus is empty (no documents with text)")
    if blank:
        dataset.documents = [d for d in dataset.documents if d.text.strip()]
        dataset.notes.append(f"{len(blank)} document(s) have no text and are left out (e.g. {blank[0]!r})")
    if not dataset.questions and require_questions:
        corpus_only = dataset.format == "beir" and not (path / "queries.jsonl").is_file()
        raise DataError(f"{path}: no questions found" + (f" (a corpus only: write a test set with `tuner data "
                                                          f"generate {path} --questions 50`)" if corpus_only else ""))
    known = {d.id for d in dataset.documents}
    unknown = sorted({i for q in dataset.questions for i in q.relevant_ids} - known)
    if unknown:
        hit = sum(bool(q.relevant_ids - known) for q in dataset.questions)
        dataset.notes.append(f"{len(unknown)} gold document id(s) name no document of the corpus (e.g. "
                             f"{unknown[0]!r}): {hit} question(s) count them as never retrieved")


def _detect(path: Path) -> tuple[Path, str]:
    if beir.looks_like(path):
        return path, "beir"
    if path.is_dir():
        path = _data_file_in(path)
    for name in ("hotpotqa", "ragas"):
        if FORMATS[name].looks_like(path):
            return path, name
    raise DataError(
        f"{path}: unrecognised dataset format (expected a BEIR folder with corpus.jsonl, "
        "RAGAS-style jsonl/json with 'question' and 'contexts', or HotpotQA json)"
    )


def _data_file_in(folder: Path) -> Path:
    """The folder's data file: <folder>/<folder name>.jsonl|.json, else its only jsonl/json file."""
    for suffix in DATA_SUFFIXES:
        named = folder / f"{folder.name}{suffix}"
        if named.is_file():
            return named
    files = sorted(p for p in folder.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file())
    if len(files) == 1:
        return files[0]
    if not files:
        raise DataError(f"{folder}: no corpus.jsonl and no .jsonl/.json data file")
    names = ", ".join(p.name for p in files)
    raise DataError(f"{folder}: several data files ({names}); point --dataset at one of them")
