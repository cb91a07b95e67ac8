"""study.json: the settings a study was created with, which every resume, report and command reads.

A typed record like `TrialFile`: it carries `schema`; a file from before the field existed loads (what it lacks
left at the defaults below), and one from a newer tuner fails with one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tuner.config import ProjectConfig
from tuner.data.split import Split
from tuner.errors import DataError
from tuner.legacy import recorded_project
from tuner.versioned import check_schema, known_fields

META_SCHEMA = 1


@dataclass(frozen=True)
class StudyMeta:
    targets: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    #: what its trials score: the targets, the guards and what reports show
    metrics: tuple[str, ...] = ()
    sampler: str | None = None
    seed: int | None = None
    #: the search space as named when the study began, and the space itself as it was then
    search_space: str = ""
    space: Mapping[str, Any] | None = None
    #: the database URL with its password redacted (None: a study folder)
    storage_url: str | None = None
    #: the project configuration it runs: models, data, evaluation (a resume with --config records the new one)
    project: Mapping[str, Any] = field(default_factory=dict)
    #: the questions held out for the verdict (None: a study from before held-out splits)
    split: Split | None = None
    #: the compiled programs the study offers its trials
    programs: tuple[str, ...] = ()
    #: where its LLM calls and embeddings are cached: "shared" (the project's cache_dir), "own" (its folder's; also
    #: every study from before caches were shared) or "storage" (its database)
    cache: str = "own"
    #: the identity of the questions and documents it measures on (None: from before it was recorded)
    data: Mapping[str, Any] | None = None

    @property
    def config(self) -> ProjectConfig:
        return ProjectConfig.model_validate(recorded_project(self.project), context={"record": True})

    @property
    def held_out(self) -> Split:
        return self.split or Split.from_json(None)

    def with_project(self, project: Mapping[str, Any], data: Mapping[str, Any] | None) -> StudyMeta:
        """Resumed with --config: what now runs (and, for a study from before it was recorded, what it measures on)."""
        return replace(self, project=dict(project), data=self.data or data)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {"schema": META_SCHEMA, **data, **{k: list(data[k]) for k in ("targets", "constraints", "metrics",
                                                                             "programs")},
                "split": None if self.split is None else self.split.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "study.json") -> StudyMeta:
        check_schema(data, META_SCHEMA, source)
        try:
            values = known_fields(cls, data)
            for key in ("targets", "constraints", "metrics", "programs"):
                values[key] = tuple(str(v) for v in values.get(key) or ())
            values["split"] = Split.from_json(data["split"]) if data.get("split") else None
            values["project"] = dict(values.get("project") or {})
            if not values["targets"]:  # every study has one: a record without any was cut or edited away
                raise ValueError("it names no target")
            return cls(**values)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{source}: not a tuner study record ({type(exc).__name__}: {exc})") from None
