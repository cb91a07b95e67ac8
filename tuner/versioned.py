"""What every typed record tuner writes (trial files, study.json, compile sidecars) shares: a `schema` number, old
records loading with what they lack left at defaults, a record from a newer tuner refused in one line."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tuner.errors import DataError, NewerRecord


def check_schema(data: Mapping[str, Any], newest: int, source: str) -> None:
    """Records from before `schema` was written count as schema 1."""
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:  # damage, not a newer tuner's work
        raise DataError(f"{source}: damaged (its schema is {schema!r}, not a record number tuner writes)")
    if schema > newest:
        raise NewerRecord(f"{source}: written by a newer tuner (schema {schema}; this one reads up to {newest}): "
                        f"upgrade tuner to read it")


def known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of `data` that are fields of the dataclass `cls` (keys a record no longer uses are ignored)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}
