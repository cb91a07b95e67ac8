"""The live view of a running study: trial i/N, its parameters, per-question progress, best so far, cost."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import optuna
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from tuner.cost import Cost
from tuner.evaluation.records import TrialFile
from tuner.study.optimize import QuestionMoved, StudyEvent, TrialDone, TrialStarted
from tuner.ui import Bar, err_console, knobs

if TYPE_CHECKING:
    from tuner.pipeline.index import Indexes


class StudyDisplay:
    def __init__(self, study: optuna.Study, total_trials: int, questions: int, targets: list[str],
                 indexes: Indexes | None = None):
        """`indexes`: the study's indexes, to say how many trials built and what they cost."""
        self.study = study
        self.indexes = indexes
        self.targets = targets
        self.questions = questions
        self.started = time.perf_counter()
        self.llm_calls = 0
        self.status = Text("")
        self.interactive = err_console.is_terminal
        # in a log: a line per finished trial (below), and the running trial's questions every 30 s
        self.progress = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err_console, disable=not self.interactive)
        from tuner.study.optimize import counted

        self.trial_task = self.progress.add_task("trials", total=total_trials, completed=counted(study), log=False)
        self.question_task = self.progress.add_task("questions", total=questions)
        self.live = Live(Group(self.progress, self.status), console=err_console, refresh_per_second=4,
                         transient=False)

    def __enter__(self) -> StudyDisplay:
        if self.interactive:
            self.live.__enter__()
        else:
            self.progress.start()
        self._update_status("", best_summary(self.study, self.targets))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.interactive:
            self.live.__exit__(*exc)
        else:
            self.progress.stop()

    def __call__(self, event: StudyEvent) -> None:
        if isinstance(event, TrialStarted):
            # a reset, not completed=0: the last trial's task is finished, and a finished task is neither logged
            # every 30 s nor timed from this trial's start
            self.progress.reset(self.question_task, description=f"trial {event.number}: {knobs(event.params)}")
        elif isinstance(event, QuestionMoved):
            self.progress.update(self.question_task, completed=event.index + (event.stage == "done"))
        elif isinstance(event, TrialDone):
            self.llm_calls += event.cost.llm_calls
            self.progress.advance(self.trial_task)
            line = describe_trial(event.trial, self.targets, event.file, event.cost)
            best = best_summary(self.study, self.targets)
            if not self.interactive:  # a log of an overnight run: one self-contained line per trial
                err_console.print(f"{line} {knobs(event.trial.params)}; best {best}", highlight=False,
                                  soft_wrap=True)
            self._update_status(line, best)

    def _update_status(self, last: str, best: str) -> None:
        minutes = (time.perf_counter() - self.started) / 60
        built = self.indexes.built if self.indexes is not None else []
        indexes = f"   indexes built: {len(built)} ({sum(s for _, s in built):.0f} s)" if built else ""
        self.status.plain = (f"best: {best}\nLLM calls this run: {self.llm_calls}{indexes}   time: {minutes:.1f} min"
                             + (f"\nlast: {last}" if last else ""))


def trial_values(trial: optuna.trial.FrozenTrial, targets: list[str], file: TrialFile | None,
                 digits: int = 4) -> list[str]:
    """Each target's value as study.results.shown_values gives it, a pruned trial's marked partial."""
    from tuner.study.results import shown_values

    values, reached = shown_values(trial, targets, file)
    partial = "" if trial.state != optuna.trial.TrialState.PRUNED else f" (partial: {reached or '?'} q)"
    return [f"{v:.{digits}f}{partial}" if v is not None else "—" for v in values]


def describe_trial(trial: optuna.trial.FrozenTrial, targets: list[str], file: TrialFile | None, cost: Cost) -> str:
    shown = ", ".join(f"{t}={v}" for t, v in zip(targets, trial_values(trial, targets, file, 3)) if v != "—")
    return (f"trial {trial.number} {trial.state.name.lower()} {shown} "
            f"({cost.llm_calls} LLM calls, {cost.cache_hits} cached, {cost.seconds:.0f}s)").replace("  ", " ")


def best_summary(study: optuna.Study, targets: list[str]) -> str:
    from tuner.study.results import best_trials

    best = best_trials(study)
    if not best:
        return "—"
    if len(targets) == 1:
        trial = best[0]
        return f"{targets[0]}={trial.values[0]:.4f} (trial {trial.number})"
    return f"{len(best)} trials on the Pareto front"
