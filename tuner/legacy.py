"""What records written by an older tuner hold, in one place: literals, never derived from today's classes, so
adding a setting, a backend or a default can never change how an old study reads or hashes.

A record's own missing fields load at their defaults through its `schema` (`versioned.py`); what lives here is
the rest: how a study's identity was hashed, and settings that existed under another shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: every LLM setting that was not common to all backends, at its default, as one flat dump held them before the
#: settings were typed by backend (study.json keeps such dumps, and a study's project hash hashes them)
FLAT_LLM_DEFAULTS: Mapping[str, Any] = {
    "path": None, "n_ctx": 4096, "n_threads": None, "decoding": "fast",
    "base_url": None, "api_key_env": None, "timeout": 120.0,
}
#: the backend a dump that names none ran on
UNNAMED_BACKEND = "llama-cpp"
#: evaluation settings added later, at the value every study ran with before they existed (a study recorded
#: before them resumes with these, and its project hash leaves them out)
EVALUATION_AS_BEFORE: Mapping[str, Any] = {"verdicts": "sampled", "statements": "judge", "verdict_contexts": "joined",
                                            "verdict_prompt": "support", "cut": None,
                                            "alignment": None, "checker": None, "blend": "none"}


#: a system's dump as study identities hashed it before systems were typed by kind: every kind's key, at its
#: default where another kind is configured (a new kind or setting is left out while at its default)
FLAT_SYSTEM_DEFAULTS: Mapping[str, Any] = {
    "python": None, "http": None, "knobs": {}, "answers": True, "path": None, "timeout": 120.0, "concurrency": 1,
    "api_key_env": None,
}

#: project settings added later, at the value every study ran with before they existed (as EVALUATION_AS_BEFORE)
PROJECT_AS_BEFORE: Mapping[str, Any] = {"answer_layout": "instructions-first"}


def hashed_project(dumped: dict[str, Any], speed_only: tuple[str, ...]) -> dict[str, Any]:
    """A project dump as study identities hash it: each LLM as a flat dump (speed-only settings at their old
    default), settings added later left out when at their old value, so a resumed study knows its trials.
    The system comes dumped without its defaults: a setting or kind added later moves no hash at its default."""
    for role in ("generator", "judge"):
        if dumped.get(role) is not None:
            flat = {key: value for key, value in {**FLAT_LLM_DEFAULTS, **dumped[role]}.items() if key not in speed_only}
            flat.update({key: FLAT_LLM_DEFAULTS[key] for key in speed_only if key in FLAT_LLM_DEFAULTS})
            dumped[role] = flat
    for key, before in EVALUATION_AS_BEFORE.items():
        if dumped["evaluation"].get(key) == before:
            del dumped["evaluation"][key]
    aligned = dumped["evaluation"].get("alignment")
    if isinstance(aligned, dict) and aligned.get("judge") is None:  # added later: an alignment naming none as before
        aligned.pop("judge", None)
    # the cut reads scores as verdicts after the fact (agreement with labels, the report): it changes no score
    dumped["evaluation"].pop("cut", None)
    for key, before in PROJECT_AS_BEFORE.items():
        if dumped.get(key) == before:
            del dumped[key]
    if not dumped.get("generators", True):  # added later: a project naming none hashes as before
        del dumped["generators"]
    if dumped.get("system", 0) is None:  # added later: tuner's own pipeline hashes as before
        del dumped["system"]
    elif dumped.get("system"):  # one flat dump, as before kinds; how fast it answers is no part of what it answers
        flat = {**FLAT_SYSTEM_DEFAULTS, **dumped["system"]}
        dumped["system"] = {key: value for key, value in flat.items() if key not in speed_only}
    return dumped


def pipeline_as_now(stored: Any) -> Any:
    """A trial's recorded pipeline without the `system` mapping every trial held beside tuner's knobs before the
    user's system had a trial class of its own (`config.SystemTrial`)."""
    if isinstance(stored, Mapping) and "system" in stored:
        return {key: value for key, value in stored.items() if key != "system"}
    return stored


def recorded_project(project: Mapping[str, Any]) -> dict[str, Any]:
    """A study.json project as it ran: a setting added since is at its value of then."""
    return {**PROJECT_AS_BEFORE, **project, "evaluation": {**EVALUATION_AS_BEFORE, **project.get("evaluation", {})}}


def legacy_constraints(user_attrs: Mapping[str, Any]) -> list[float]:
    """A trial's constraint violations as studies before one typed trial record kept them beside its results
    (its `constraints` user attribute); [] when it has none."""
    return list(user_attrs.get("constraints") or [])
