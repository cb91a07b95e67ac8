"""Rounds: round 1 searches the given space as study NAME; its analysis proposes the next space, which round 2
searches as study NAME.r2 from round 1's best (enqueued as its baseline), sharing round 1's caches; and so on.
A space that holds model knobs beside others is searched models first (Greedy-M): round 1 searches the models with
every other knob at the base, round 2 the whole space with the models fixed at round 1's choice.

Every round holds out the same questions (round 1's split) and ends with its verdict on them. Stops early when
the analysis has nothing left to propose, or when two rounds in a row gain nothing distinguishable from zero:
their best vs their baseline on the held-out questions (on the search questions when nothing is held out) has
a paired bootstrap CI that contains 0.
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
from tuner.analysis.verdict import give_verdict
from tuner.errors import TunerError
from tuner.reports import Report, write_report
from tuner.reports._data import spend
from tuner.study.results import StudyView, read_study, require_a_complete_trial
from tuner.study.session import Session, StudySpec
from tuner.study.space import SearchSpace, load_space
from tuner.study.storage import StudyFolder, study_folder

#: scores on held-out what a round's verdict needs: (the round's view, its session) -> the view with them
Judge = Callable[[StudyView, Session], StudyView]

SPACE_FILE = "space.yaml"
#: the whole space of a Greedy-M run, kept beside round 1's models-only space.yaml: a resume that names no space
#: reads round 1's, and round 2 must still search the rest of the whole space around the chosen models
WHOLE_SPACE_FILE = "space.whole.yaml"


@dataclass(frozen=True)
class RoundOutcome:
    round: int
    study: str
    space: Path
    changes: tuple[str, ...]  # what the previous round's analysis changed (empty for round 1)
    reasons: tuple[str, ...]
    headline: Comparison | None  # best vs baseline on the search questions
    held_out: Comparison | None  # the same on the held-out questions; None: nothing held out (or not scored)
    best_value: float | None
    baseline_value: float | None
    calls: int
    cache_hits: int
    minutes: float
    report: Path

    @property
    def gained(self) -> bool:
        """A gain distinguishable from zero: on held-out questions when the study holds some out."""
        deciding = self.held_out if self.held_out is not None else self.headline
        return deciding is not None and deciding.verdict == "better"


def round_name(name: str, number: int) -> str:
    return name if number == 1 else f"{name}.r{number}"


def latest_round(spec: StudySpec) -> StudyFolder:
    """The folder of the latest round that has a study (where a Ctrl-C'd rounds run was)."""
    number = 1
    while study_folder(spec.studies_dir, round_name(spec.name, number + 1), spec.storage).read_meta():
        number += 1
    return study_folder(spec.studies_dir, round_name(spec.name, number), spec.storage)


def run_rounds(spec: StudySpec, rounds: int, trials: int, reports_dir: Path, timeout: float | None = None,
               prepare: Callable[[Session], None] | None = None,
               run: Callable[[Session, int, float | None], int] | None = None,
               on_round: Callable[[RoundOutcome], None] | None = None,
               judge: Judge | None = None) -> tuple[list[RoundOutcome], str]:
    """Run up to `rounds` rounds of `trials` trials each; returns the outcomes and why the rounds stopped.
    `prepare(session)` may attach models (tests pass fakes); `run(session, trials, timeout)` runs a round's
    trials and `judge(view, session)` its verdict (the CLI wraps both in its displays)."""
    run = run or (lambda session, n, limit: session.run(n, limit))
    judge = judge or (lambda view, session: give_verdict(view, session.runner()))
    outcomes: list[RoundOutcome] = []
    first: Session | None = None
    changes: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    baseline: dict = dict(spec.baseline)
    space_file = spec.search_space
    stop = f"ran the {rounds} round(s) asked for"
    folder = study_folder(spec.studies_dir, spec.name, spec.storage)
    whole_file = folder.root / WHOLE_SPACE_FILE
    resumed = Path(spec.search_space) == folder.root / SPACE_FILE and whole_file.is_file()
    meta = folder.read_meta()
    project = spec.project if spec.project is not None else meta.config if meta else None
    whole = load_space(whole_file if resumed else spec.search_space, project)
    models = whole.models_first() if rounds > 1 else None
    if models is not None:  # Greedy-M: round 1 searches the models alone
        # rewritten until round 1's study exists: a space refused before its first trial may be mended
        started = folder.read_meta() is not None
        _written(whole_file, whole, again=not started)
        space_file = _written(folder.root / SPACE_FILE, models, again=not started)
        changes = (f"settles the models first ({', '.join(n for n in models.params if models.facts(n).model)}), every "
                   f"other knob at the base",)
        reasons = ("a model changes what suits the other knobs (the generator above all, in IBM's RAG-HPO study), "
                   "so they are searched around the chosen models next (Greedy-M)",)
    for number in range(1, rounds + 1):
        name = round_name(spec.name, number)
        if number == 1:
            round_spec = replace(spec, search_space=space_file)
        else:  # same project and caches as round 1; starts from the previous best
            # a round seeded like the first would replay the first round's draws wherever the spaces overlap
            seed = None if spec.settings.seed is None else spec.settings.seed + 1000 * (number - 1)
            round_spec = replace(spec, name=name, search_space=space_file, project=first.project, dataset=None,
                                 limit=None, cache_dir=first.project.cache_dir, baseline=baseline,
                                 settings=replace(spec.settings, seed=seed), holdout=first.split,
                                 before_first_trial=None,  # round 1 checked the same judge on the same data
                                 programs_from=(first.folder.root / "programs",))
        session = Session.open(round_spec)
        first = first or session
        if prepare:
            prepare(session)
        run(session, trials, timeout)
        require_a_complete_trial(session.study)  # a round with no result has nothing to judge or build on
        report = write_report(judge(read_study(session.folder), session), reports_dir / name)
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
        next_file = session.folder.root.parent / round_name(spec.name, number + 1) / SPACE_FILE
        if number == 1 and models is not None and best is not None:
            around, fixed = whole.around(best.pipeline)
            space_file = _written(next_file, around)
            searched = [n for n, p in around.params.items() if not p.single]
            changes = (f"the models fixed at round 1's choice: {', '.join(f'{n}={best.pipeline[n]}' for n in fixed)}",
                       f"searches {', '.join(searched)} around them")
            reasons = ("round 1 settled them", "what suits the other knobs depends on the models")
        elif analysis.next_space is None or best is None:
            stop = "the analysis has nothing left to propose"
            break
        else:
            space_file = _written(next_file, analysis.next_space)
            changes = tuple(p.change for p in analysis.proposals if p.in_space)
            reasons = tuple(f"{p.reason} ({p.trigger})" for p in analysis.proposals if p.in_space)
        baseline = dict(best.pipeline)
    write_journey(reports_dir / spec.name / "journey.md", spec.name, outcomes, stop)
    return outcomes, stop


def _written(path: Path, space: SearchSpace, again: bool = False) -> Path:
    """`space` in `path`, written once (unless `again`): a resumed run searches the space it already started."""
    if again or not path.is_file():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(space.model_dump(mode="json", exclude_defaults=True), sort_keys=False),
                            encoding="utf-8")
        except OSError as exc:
            raise TunerError(f"{path}: cannot write the round's space ({exc.strerror})") from None
    return path


def _outcome(number: int, session: Session, space: Path, changes: tuple[str, ...], reasons: tuple[str, ...],
             report: Report) -> RoundOutcome:
    view = report.analysis.view
    best, baseline = view.best, view.baseline
    spent = spend(view)
    verdict = report.analysis.verdict
    return RoundOutcome(number, session.folder.name, Path(space), changes, reasons, report.analysis.headline,
                        verdict.headline if verdict else None, best.values[0] if best else None,
                        baseline.values[0] if baseline and baseline.values else None,
                        spent.calls, spent.cache_hits, spent.trial_seconds / 60, report.path)


def write_journey(path: Path, name: str, outcomes: list[RoundOutcome], stop: str | None) -> None:
    lines = [f"# Journey of `{name}`", "",
             "Each round searches a space the previous round's analysis proposed, starting from the previous "
             "round's best configuration (its baseline). Before → after is the round's baseline → best with the "
             "paired bootstrap 95 % CI of the difference: in-sample on the search questions that picked the best, "
             "and held-out on questions no round ever searched on. The held-out figure decides whether a round "
             "gained.", ""]
    for o in outcomes:
        lines += [f"## Round {o.round}: study `{o.study}`", ""]
        if o.changes:
            lines += ["What changed, and why:", ""]
            lines += [f"- {change} — {reason}" for change, reason in zip(o.changes, o.reasons)] + [""]
        else:
            lines += [f"Search space: `{o.space}`.", ""]
        if o.best_value is None:
            lines += ["No complete trial met the constraints.", ""]
        elif o.headline is None or o.headline.ci is None:
            lines += [f"Best {o.best_value:.3f}; no paired comparison with the baseline was possible.", ""]
        else:
            rows = [("in-sample", o.headline)] + ([("held-out", o.held_out)] if o.held_out is not None else [])
            lines += ["| | before → after | difference | 95 % CI | questions |", "|---|---|---|---|---|"]
            lines += [f"| {label} | {c.reference_mean:.3f} → {c.candidate_mean:.3f} | {c.mean_difference:+.3f} | "
                      f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}] | {c.n} |" if c.ci is not None else
                      f"| {label} | — | — | — | {c.n} |" for label, c in rows]
            deciding = "held-out" if o.held_out is not None else "in-sample (nothing held out)"
            lines += ["", f"{o.headline.metric}, judged {deciding}: **"
                      f"{'gain' if o.gained else 'no gain distinguishable from zero'}**.", ""]
        lines += [f"Cost: {o.calls} LLM calls paid, {o.cache_hits} served from the cache, {o.minutes:.1f} min "
                  f"inside trials. Report: [{o.study}/report.md](../{o.study}/report.md).", ""]
    if stop:
        lines += [f"**Stopped:** {stop}.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
