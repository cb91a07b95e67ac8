"""Small readers shared by the loaders; every failure becomes a one-line DataError."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tuner.errors import DataError


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
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
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None


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
