"""Experiment reports: report.md + PNG plots + next_space.yaml, from a study's storage and trial files alone.

    write_report(read_study(folder), Path("reports") / folder.name)

No model is loaded and no LLM is called; writing again gives the same files (idempotent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from tuner.analysis import Analysis, analyze
from tuner.errors import TunerError
from tuner.reports import _data, plots
from tuner.reports.markdown import render
from tuner.study.results import StudyView, read_study
from tuner.study.storage import StudyFolder

__all__ = ["Report", "study_report", "write_report"]


@dataclass(frozen=True)
class Report:
    path: Path  # report.md
    analysis: Analysis
    next_space: Path | None


def write_report(view: StudyView, out: Path) -> Report:
    analysis = analyze(view)
    try:
        out.mkdir(parents=True, exist_ok=True)
        drawn = _draw(analysis, out)
        (out / "report.md").write_text(render(analysis, drawn), encoding="utf-8")
        space_file = out / "next_space.yaml"
        if analysis.next_space is not None:
            space_file.write_text(f"# next experiments for study {view.name}, written by tuner's analysis\n"
                                  + yaml.safe_dump(analysis.next_space.model_dump(mode="json", exclude_defaults=True),
                                                   sort_keys=False), encoding="utf-8")
        else:
            space_file.unlink(missing_ok=True)
            space_file = None
    except OSError as exc:
        raise TunerError(f"{out}: cannot write the report ({exc.strerror})") from None
    return Report(out / "report.md", analysis, space_file)


def study_report(folder: StudyFolder, reports_dir: Path, view: StudyView | None = None) -> Report:
    """The study's report in reports_dir/NAME: of `view` (the study as its caller last read it, the verdict's
    included), else read back from its storage."""
    return write_report(view or read_study(folder), reports_dir / folder.name)


def _draw(analysis: Analysis, out: Path) -> dict[str, str]:
    """Every plot the data allows; returns plot name -> file name (relative to report.md)."""
    view = analysis.view
    drawn: dict[str, str] = {}

    def draw(name: str, make) -> None:
        path = out / f"{name}.png"
        make(path)
        drawn[name] = path.name

    history = _data.history(view)
    if history.numbers:
        draw("history", lambda p: plots.plot_history(history, view.target, p))
    if any(e.importance is not None for e in analysis.effects):
        draw("importances", lambda p: plots.plot_importances(analysis.effects, p))
    points = _data.slices(view)
    if points:
        draw("slices", lambda p: plots.plot_slices(points, view.target, p))
    deltas = _data.deltas(analysis)
    if deltas:
        draw("deltas", lambda p: plots.plot_deltas(deltas, view.target, p))
    trials, seconds = _data.cost_by_stage(view)
    if trials:
        draw("costs", lambda p: plots.plot_costs(trials, seconds, p))
    points, front = _data.front_points(view)
    if points:
        draw("front", lambda p: plots.plot_front(points, front, view.targets, p))
    for stale in set(p.stem for p in out.glob("*.png")) - set(drawn):  # plots a previous report drew, now moot
        if stale in ("history", "importances", "slices", "deltas", "costs"):
            (out / f"{stale}.png").unlink()
    return drawn
