"""The judge check a new study runs before its first trial (`tuner optimize --judge-check warn|strict|off`).

A few labelled cases from the study's search questions, judged with the study's judge (cached like every call):
`warn` records the check in the study and returns what is wrong, `strict` refuses to create the study instead and
names the full check to run on the same config and data. Retrieval-only studies have no judge to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tuner.errors import ConfigError, DataError
from tuner.evaluation.judge.check import CHECK_FILE, checks_json, quick_check

MODES = ("warn", "strict", "off")


@dataclass(frozen=True)
class Precheck:
    """What the check found: its problems, why it could not run, or each metric's AUC when all is well."""
    #: the metrics it checked ((): none, a retrieval or cost study, or --judge-check off)
    metrics: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    skipped: str | None = None
    aucs: Mapping[str, float | None] = field(default_factory=dict)
    #: the judge calls it paid, and those served from the cache (a resumed or repeated check pays none)
    paid: int = 0
    cached: int = 0

    @property
    def refuses(self) -> bool:
        """Whether `strict` refuses the study on it."""
        return bool(self.problems or self.skipped)


def judge_precheck(session, mode: str) -> Precheck:
    """Check the session's judge. `warn` records a check that ran in the study; `strict` records nothing when it
    found a problem or could not run (the caller refuses the study, with `same_check`'s advice)."""
    if mode not in MODES:
        raise ConfigError(f"--judge-check {mode!r}: choose {', '.join(MODES)}")
    judged = session.spec.settings.metrics_needed()  # a retrieval or cost target has no judge to check
    if mode == "off" or not judged:
        return Precheck()
    try:
        checked = quick_check(session.runner(), session.search_questions, judged)
    except DataError as exc:
        return Precheck(tuple(judged), skipped=str(exc))
    found = Precheck(tuple(judged), tuple(checked.problems), aucs={m: c.auc for m, c in checked.metrics.items()},
                     paid=sum(c.paid_calls for c in checked.cases), cached=sum(c.cached_calls for c in checked.cases))
    if not (mode == "strict" and found.refuses):  # refused: no study is created, so nothing to record in one
        session.folder.write_doc(CHECK_FILE, checks_json([checked]))
    return found


def same_check(session, command: Mapping[str, Path | None], metrics: tuple[str, ...]) -> dict[str, str]:
    """The options of the `tuner judge check --quick` that repeats this check: the same cases, from the same
    search questions (the study's --limit and split), to read case by case. `command`: the options (config,
    dataset) the user gave."""
    options = {**command, "limit": session.project.dataset.limit,
               "holdout": f"{session.split.fraction:g}" if session.split.active else None}
    return {**{k: str(v) for k, v in options.items() if v is not None}, "metrics": ",".join(metrics)}
