"""Small readers shared by the loaders; every failure becomes a one-line DataError."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.errors import DataError
from tuner.files import refuse_special


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    refuse_special(path)
    try:
        with path.open("rb") as handle:
            offset = 0
            for number, raw in enumerate(handle, 1):
                line = decode(path, raw, offset, f"line {number}")
                offset += len(raw)
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}: line {number} is not valid JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise DataError(f"{path}: line {number} is not a JSON object")
                yield row
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None


def read_json(path: Path) -> Any:
    refuse_special(path)
    try:
        return json.loads(decode(path, path.read_bytes()))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None


def decode(path: Path, raw: bytes, offset: int = 0, where: str = "") -> str:
    """UTF-8 text, or one line naming the file and the first byte that is not. A byte-order mark at the start of
    the file (what Windows editors write) is dropped: it is no part of the text."""
    try:
        return raw.decode("utf-8-sig" if offset == 0 else "utf-8")
    except UnicodeDecodeError as exc:
        at = f"{where}, " if where else ""
        raise DataError(f"{path}: not UTF-8 text ({at}byte {offset + exc.start}: {raw[exc.start:exc.start + 1]!r}); "
                        f"a binary file, or text in another encoding (re-save it as UTF-8)") from None


def as_text_list(value: Any) -> list[str]:
    """A field that may hold one string, a list of strings, or a JSON-encoded list."""
    if value is None:
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                decoded = json.loads(stripped)
            except json.JSONDecodeError:
                return [value]
            return as_text_list(decoded)
        return [value] if stripped else []
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for item in value:
            out.extend(as_text_list(item))
        return out
    return [str(value)]


def first_present(row: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if row.get(key) not in (None, "", []):
            return row[key]
    return None

