"""The judge check a new study runs before its first trial (`tuner optimize --judge-check warn|strict|off`).

A few labelled cases from the study's search questions, judged with the study's judge (cached like every call):
`warn` records the check in the study and returns what is wrong, `strict` refuses to create the study instead and
names the full check to run on the same config and data. Retrieval-only studies have no judge to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tuner.errors import ConfigError, DataError
from tuner.evaluation.judge_check import CHECK_FILE, checks_json, quick_check

MODES = ("warn", "strict", "off")


def judge_precheck(session, mode: str, command: Mapping[str, Path | None]) -> list[str]:
    """Check the session's judge; returns lines for the user ("warning: …", or the AUCs when all is well). Raises
    ConfigError in strict mode when the check finds a problem or cannot run. `command`: the options (config,
    dataset) the user gave, for the advice."""
    if mode not in MODES:
        raise ConfigError(f"--judge-check {mode!r}: choose {', '.join(MODES)}")
    judged = session.spec.settings.metrics_needed()  # a retrieval or cost target has no judge to check
    if mode == "off" or not judged:
        return []
    try:
        checked = quick_check(session.runner(), session.search_questions, judged)
    except DataError as exc:
        if mode == "strict":
            raise ConfigError(f"judge check (--judge-check strict) could not run: {exc}") from None
        return [f"warning: judge check skipped: {exc}"]
    if mode == "strict" and checked.problems:  # refused: no study is created, so no study to name
        raise ConfigError(f"judge check failed (--judge-check strict): {checked.problems[0]}; see "
                          f"`{same_check(session, command, judged)}`, choose another judge, or use --judge-check warn")
    session.folder.write_doc(CHECK_FILE, checks_json([checked]))
    if checked.problems:
        return [f"warning: judge check: {problem}" for problem in checked.problems]
    return ["judge check: " + "; ".join(f"{m} AUC {c.auc:.2f}" for m, c in checked.metrics.items())]


def same_check(session, command: Mapping[str, Path | None], metrics: list[str]) -> str:
    """The `tuner judge check` that repeats this check: the same cases, from the same search questions (the
    study's --limit and split), to read case by case."""
    options = {**command, "limit": session.project.dataset.limit,
               "holdout": f"{session.split.fraction:g}" if session.split.active else None}
    return " ".join(["tuner judge check --quick", *(f"--{k} {v}" for k, v in options.items() if v is not None),
                     "--metrics", ",".join(metrics)])
