"""Compiled programs on disk: OPTIMIZER-PROGRAMID.json (DSPy's `program.save`) beside a sidecar
OPTIMIZER-PROGRAMID.meta.json saying how it was made and how it did on held-out questions. Cheap to import:
studies list their compiled programs without loading DSPy.

The sidecar is a typed record like `TrialFile`: it carries `schema`; one from before the field existed loads (what
it lacks left empty) and one from a newer tuner fails with one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError, DataError
from tuner.files import write_json
from tuner.versioned import check_schema, known_fields

SIDECAR_SUFFIX = ".meta.json"
SIDECAR_SCHEMA = 1


@dataclass(frozen=True)
class Versus:
    """One metric of a program against the reference program, paired on the same questions (95 % CI)."""

    difference: float | None
    ci: tuple[float, float] | None
    n: int
    verdict: str
    sentence: str


@dataclass(frozen=True)
class ProgramRow:
    """A program's evaluation summarised: metric means, how often it refused or cited, what it cost, and (all but
    the reference) each metric against the reference."""

    questions: int
    means: Mapping[str, float | None]
    refusal_rate: float
    citation_rate: float
    llm_calls: int
    vs_reference: Mapping[str, Versus] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {"questions": self.questions, **self.means, "refusal_rate": self.refusal_rate,
                "citation_rate": self.citation_rate, "llm_calls": self.llm_calls}
        return {**data, "vs_reference": {m: asdict(v) for m, v in self.vs_reference.items()}} if self.vs_reference \
            else data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProgramRow:
        fixed = {"questions", "refusal_rate", "citation_rate", "llm_calls", "vs_reference"}
        return cls(int(data["questions"]), {k: v for k, v in data.items() if k not in fixed},
                   float(data["refusal_rate"]), float(data["citation_rate"]), int(data["llm_calls"]),
                   {m: Versus(v["difference"], tuple(v["ci"]) if v["ci"] else None, int(v["n"]), v["verdict"],
                              v["sentence"]) for m, v in (data.get("vs_reference") or {}).items()})


@dataclass(frozen=True)
class Sidecar:
    """How a compiled program was made, and its held-out comparison with the program it started from."""

    program_id: str = ""
    optimizer: str | None = None
    target: str | None = None
    guard: str | None = None
    seed: int | None = None
    budget: int | None = None
    #: what the compile costs on a cold cache, and of those the calls paid in the run that made it
    calls: int | None = None
    calls_paid: int | None = None
    start_program: str | None = None
    start_program_id: str | None = None
    demos: int = 0
    instructions: str = ""
    generator: str | None = None
    judge: str | None = None
    pipeline: Mapping[str, Any] = field(default_factory=dict)
    train_ids: tuple[str, ...] = ()
    held_out_ids: tuple[str, ...] = ()
    train_score: float | None = None
    #: program name -> its held-out row (the start program's and "compiled"); None until judged
    held_out: Mapping[str, ProgramRow] | None = None

    def judged(self, table: Mapping[str, ProgramRow]) -> Sidecar:
        return replace(self, held_out=dict(table))

    @property
    def held_out_sentence(self) -> str:
        """The compiled program against its start program on held-out questions, in words."""
        row = (self.held_out or {}).get("compiled")
        said = next((v.sentence for v in row.vs_reference.values()), None) if row else None
        return said or "not judged on held-out questions"

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"schema": SIDECAR_SCHEMA, **data, "pipeline": dict(self.pipeline), "train_ids": list(self.train_ids),
                "held_out_ids": list(self.held_out_ids),
                "held_out": None if self.held_out is None else {k: r.to_json() for k, r in self.held_out.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> Sidecar:
        check_schema(data, SIDECAR_SCHEMA, source)
        try:
            values = known_fields(cls, data)
            values.setdefault("calls", data.get("calls_paid"))  # sidecars from before both were kept
            values["train_ids"] = tuple(values.get("train_ids") or ())
            values["held_out_ids"] = tuple(values.get("held_out_ids") or ())
            if values.get("held_out") is not None:
                values["held_out"] = {k: ProgramRow.from_json(r) for k, r in values["held_out"].items()}
            return cls(**values)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"{source}: not a tuner sidecar ({type(exc).__name__}: {exc})") from None


def sidecar_path(program_path: Path) -> Path:
    return program_path.with_name(program_path.stem + SIDECAR_SUFFIX)


def write_sidecar(program_path: Path, sidecar: Sidecar) -> None:
    write_json(sidecar_path(program_path), sidecar.to_json(), indent=2)


def read_sidecar(program_path: Path) -> Sidecar | None:
    """How a saved program was made (None for a program saved without a sidecar)."""
    path = sidecar_path(program_path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable sidecar ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: unreadable sidecar (not a JSON object)")
    return Sidecar.from_json(data, str(path))


def compiled_programs(folder: Path) -> list[Path]:
    """The compiled programs saved in a folder (a study's programs/), by name."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.json") if not p.name.endswith(SIDECAR_SUFFIX))
