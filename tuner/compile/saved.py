"""Compiled programs on disk: OPTIMIZER-PROGRAMID.json (DSPy's `program.save`) beside a sidecar
OPTIMIZER-PROGRAMID.meta.json saying how it was made. Cheap to import: studies list their compiled programs
without loading DSPy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError

SIDECAR_SUFFIX = ".meta.json"


def sidecar_path(program_path: Path) -> Path:
    return program_path.with_name(program_path.stem + SIDECAR_SUFFIX)


def write_sidecar(program_path: Path, data: dict[str, Any]) -> None:
    sidecar_path(program_path).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")


def read_sidecar(program_path: Path) -> dict[str, Any]:
    """How a saved program was made ({} for a program saved without one)."""
    path = sidecar_path(program_path)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable sidecar ({exc})") from None


def compiled_programs(folder: Path) -> list[Path]:
    """The compiled programs saved in a folder (a study's programs/), by name."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.endswith(SIDECAR_SUFFIX))
