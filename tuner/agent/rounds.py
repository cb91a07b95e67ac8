"""Rounds: round 1 searches the given space as study NAME; its analysis proposes the next space, which round 2
searches as study NAME.r2 from round 1's best (enqueued as its baseline), sharing round 1's caches; and so on.

Stops early when the analysis has nothing left to propose, or when two rounds in a row gain nothing
distinguishable from zero (their best vs their baseline: the paired bootstrap CI contains 0).
Each round's next space is kept in the next round's study folder (`space.yaml`), so a run killed at any point
and started again with the same command continues the round it was in. `reports/NAME/journey.md` says, per
round, what changed and why, the target before → after with its CI, and what it cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from tuner.analysis.stats import Comparison
from tuner.errors import TunerError
from tuner.reports import Report, write_report
from tuner.reports._data import spend
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec

SPACE_FILE = "space.yaml"


@dataclass(frozen=True)
class RoundOutcome:
    round: int
    study: str
    space: Path
    changes: tuple[str, ...]  # what the previous round's analysis changed (empty for round 1)
    reasons: tuple[str, ...]
    headline: Comparison | None
    best_value: float | None
    baseline_value: float | None
    calls: int
    cache_hits: int
    minutes: float
    report: Path

    @property
    def gained(self) -> bool:
        return self.headline is not None and self.headline.verdict == "better"


def round_name(name: str, number: int) -> str:
    return name if number == 1 else f"{name}.r{number}"


def run_rounds(spec: StudySpec, rounds: int, trials: int, reports_dir: Path, timeout: float | None = None,
               prepare: Callable[[Session], None] | None = None,
               run: Callable[[Session, int, float | None], int] | None = None,
               on_round: Callable[[RoundOutcome], None] | None = None) -> tuple[list[RoundOutcome], str]:
    """Run up to `rounds` rounds of `trials` trials each; returns the outcomes and why the rounds stopped.
    `prepare(session)` may attach models (tests pass fakes); `run(session, trials, timeout)` runs a round's
    trials (the CLI wraps it in its live display)."""
    run = run or (lambda session, n, limit: session.run(n, limit))
    outcomes: list[RoundOutcome] = []
    first: Session | None = None
    changes: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    baseline: dict = dict(spec.baseline)
    space_file = spec.search_space
    stop = f"ran the {rounds} round(s) asked for"
    for number in range(1, rounds + 1):
        name = round_name(spec.name, number)
        if number == 1:
            round_spec = spec
        else:  # same project and caches as round 1; starts from the previous best
            # a round seeded like the first would replay the first round's draws wherever the spaces overlap
            seed = None if spec.settings.seed is None else spec.settings.seed + 1000 * (number - 1)
            round_spec = replace(spec, name=name, search_space=space_file, project=first.project, dataset=None,
                                 limit=None, cache_dir=first.project.cache_dir, baseline=baseline,
                                 settings=replace(spec.settings, seed=seed))
        session = Session.open(round_spec)
        first = first or session
        if prepare:
            prepare(session)
        run(session, trials, timeout)
        report = write_report(read_study(session.folder, spec.storage), reports_dir / name)
        outcome = _outcome(number, session, space_file, changes, reasons, report)
        outcomes.append(outcome)
        if on_round:
            on_round(outcome)
        write_journey(reports_dir / spec.name / "journey.md", spec.name, outcomes, None)
        analysis = report.analysis
        best = analysis.view.best
        if len(outcomes) >= 2 and not outcomes[-1].gained and not outcomes[-2].gained:
            stop = "two rounds in a row gained nothing distinguishable from zero"
            break
        if number == rounds:
            break
        if analysis.next_space is None or best is None:
            stop = "the analysis has nothing left to propose"
            break
        next_folder = session.folder.root.parent / round_name(spec.name, number + 1)
        space_file = next_folder / SPACE_FILE
        if not space_file.is_file():  # written once: a resumed run searches the space it already started
            try:
                next_folder.mkdir(parents=True, exist_ok=True)
                space_file.write_text(yaml.safe_dump(analysis.next_space.model_dump(mode="json",
                                                                                     exclude_defaults=True),
                                                     sort_keys=False), encoding="utf-8")
            except OSError as exc:
                raise TunerError(f"{space_file}: cannot write the next round's space ({exc.strerror})") from None
        changes = tuple(p.change for p in analysis.proposals if p.in_space)
        reasons = tuple(f"{p.reason} ({p.trigger})" for p in analysis.proposals if p.in_space)
        baseline = dict(best.pipeline)
    write_journey(reports_dir / spec.name / "journey.md", spec.name, outcomes, stop)
    return outcomes, stop


def _outcome(number: int, session: Session, space: Path, changes: tuple[str, ...], reasons: tuple[str, ...],
             report: Report) -> RoundOutcome:
    view = report.analysis.view
    best, baseline = view.best, view.baseline
    spent = spend(view)
    return RoundOutcome(number, session.folder.name, Path(space), changes, reasons, report.analysis.headline,
                        best.values[0] if best else None, baseline.values[0] if baseline and baseline.values else None,
                        spent.calls, spent.cache_hits, spent.trial_seconds / 60, report.path)


def write_journey(path: Path, name: str, outcomes: list[RoundOutcome], stop: str | None) -> None:
    lines = [f"# Journey of `{name}`", "",
             "Each round searches a space the previous round's analysis proposed, starting from the previous "
             "round's best configuration (its baseline). Before → after is the round's baseline → best on the "
             "round's questions, with the paired bootstrap 95 % CI of the difference.", ""]
    for o in outcomes:
        lines += [f"## Round {o.round}: study `{o.study}`", ""]
        if o.changes:
            lines += ["What changed, and why:", ""]
            lines += [f"- {change} — {reason}" for change, reason in zip(o.changes, o.reasons)] + [""]
        else:
            lines += [f"Search space: `{o.space}`.", ""]
        head = o.headline
        if o.best_value is None:
            lines += ["No complete trial met the constraints.", ""]
        elif head is None or head.ci is None:
            lines += [f"Best {o.best_value:.3f}; no paired comparison with the baseline was possible.", ""]
        else:
            lines += [f"{head.metric}: {head.reference_mean:.3f} → {head.candidate_mean:.3f} "
                      f"({head.mean_difference:+.3f}, 95 % CI [{head.ci[0]:+.3f}, {head.ci[1]:+.3f}], "
                      f"{head.n} questions): **{'gain' if o.gained else 'no gain distinguishable from zero'}**"
                      + ("" if o.gained else " (" + head.verdict + ")") + ".", ""]
        lines += [f"Cost: {o.calls} LLM calls paid, {o.cache_hits} served from the cache, {o.minutes:.1f} min "
                  f"inside trials. Report: [{o.study}/report.md](../{o.study}/report.md).", ""]
    if stop:
        lines += [f"**Stopped:** {stop}.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
