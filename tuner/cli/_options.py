"""Options shared by several commands, and the parsing of option values."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from tuner.errors import ConfigError

ConfigOption = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="project config YAML (default: built-in defaults)")
]
DatasetOption = Annotated[
    Optional[Path],
    typer.Option("--dataset", "-d", help="dataset folder or file (default: the config's, else the demo)")
]
LimitOption = Annotated[Optional[int], typer.Option("--limit", min=1, help="use only the first N questions")]

#: where studies and reports live unless --studies-dir / --reports-dir say otherwise
STUDIES = Path("studies")
REPORTS = Path("reports")


def study_option(help_text: str) -> Any:
    """The --study/-s option, with what it means to this command."""
    return typer.Option("--study", "-s", help=help_text)


StudyOption = Annotated[str, study_option("study name (a folder under --studies-dir)")]
StudiesDirOption = Annotated[Path, typer.Option("--studies-dir", help="where studies live")]
ReportsDirOption = Annotated[Path, typer.Option("--reports-dir", help="where experiment reports are written")]
StorageOption = Annotated[
    Optional[str], typer.Option("--storage", help="RDB URL (postgresql://…, sqlite:///…) instead of the journal file")
]

CacheStudyOption = Annotated[Optional[str], study_option(
    "the cache this study uses (its own with --own-cache) instead of the config's")]



def metric_list(text: str | None) -> list[str] | None:
    """--metrics as a list; None (the config's) when left out. Given but empty is a mistake, not "all"."""
    if text is None:
        return None
    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise ConfigError("--metrics is empty: name at least one RAGAS metric, or leave it out for the config's")
    return names



def parse_duration(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise ConfigError(f"--timeout {text!r}: expected a duration like 90s, 30m, 8h or 1d")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
