"""The report's numbers as plain data, computed from a study view and its analysis: testable without a plot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.analysis import Analysis
from tuner.compile.saved import Sidecar, read_sidecar
from tuner.cost import Cost
from tuner.errors import TunerError
from tuner.evaluation.judge.cut import at_chance, setting_name
from tuner.metrics import SCORED_METRICS
from tuner.study.results import StudyView

STAGE_ORDER = ("index", "query", "retrieve", "generate", *SCORED_METRICS)


@dataclass(frozen=True)
class History:
    numbers: tuple[int, ...]  # complete trials, in order
    values: tuple[float, ...]
    best_so_far: tuple[float, ...]
    pruned: tuple[tuple[int, float, int], ...]  # (trial, mean over the questions it reached, questions reached)


@dataclass(frozen=True)
class FailureRow:
    trial: int
    state: str
    questions: int
    by_metric: dict[str, dict[str, int]]  # metric -> reason -> count
    refusals: int
    no_context: int
    generation_errors: int


@dataclass(frozen=True)
class Spend:
    """LLM calls and tokens over a set of trials: paid (reached a model) vs served from the cache."""

    calls: int
    tokens: int
    cache_hits: int
    cached_tokens: int
    trial_seconds: float
    model_seconds: float
    #: indexes the trials built for their index knobs (the project's own, built before the first trial, not
    #: counted), and the seconds they took
    indexes: int = 0
    index_seconds: float = 0.0


def history(view: StudyView) -> History:
    numbers, values, best, running = [], [], [], float("-inf")
    pruned = []
    for t in view.trials:
        if t.state == "complete" and t.values:
            running = max(running, t.values[0]) if t.feasible else running
            numbers.append(t.number)
            values.append(t.values[0])
            best.append(running if running > float("-inf") else float("nan"))
        elif t.state == "pruned" and t.result is not None:
            mean = t.result.value(view.target)
            pruned.append((t.number, float("nan") if mean is None else mean, len(t.result.questions)))
    return History(tuple(numbers), tuple(values), tuple(best), tuple(pruned))


def failures(view: StudyView) -> list[FailureRow]:
    rows = []
    for t in view.trials:
        if t.result is None:
            continue
        metrics = {m: dict(r) for m, r in t.result.failures.items() if m != "generation"}
        rows.append(FailureRow(t.number, t.state, len(t.result.questions), metrics, t.result.refusals,
                               t.result.no_context, t.result.failures.get("generation", {}).get("unparsable", 0)))
    return rows


@dataclass(frozen=True)
class CompiledRow:
    """A compiled program the study offered: how it was made, what it cost, how its trials did."""

    path: str
    optimizer: str | None
    calls: int | None  # LLM calls the compile made (its cost on a cold cache)
    trained_on_search: int  # of this study's search questions, the ones it was compiled on
    held_out: str  # the compile's own held-out comparison with its start program, in words
    trials: tuple[tuple[int, float | None], ...]  # (trial, target value) of the trials that drew it


def compiled(view: StudyView) -> list[CompiledRow]:
    search = {q.id for t in view.trials if t.result for q in t.result.questions}
    rows = []
    for path in view.meta.programs:
        try:
            sidecar = read_sidecar(Path(path)) or Sidecar()
        except TunerError:  # a report never fails on one unreadable sidecar
            sidecar = Sidecar()
        used = tuple((t.number, t.values[0] if t.values else None) for t in view.trials
                     if t.params.get("program") == path)
        rows.append(CompiledRow(path, sidecar.optimizer, sidecar.calls, len(search & set(sidecar.train_ids)),
                                sidecar.held_out_sentence, used))
    return rows


def spend(view: StudyView) -> Spend:
    total = Cost()
    seconds = 0.0
    builds = [t.result.cost_by_stage["index"] for t in view.trials if t.result and "index" in t.result.cost_by_stage]
    for t in view.trials:
        cost = t.result.cost if t.result is not None else t.spent  # an interrupted trial paid too
        if cost is not None:
            total.add(cost)
            seconds += cost.seconds
    return Spend(total.llm_calls, total.tokens, total.cache_hits, total.cached_tokens, seconds, total.model_seconds,
                 len(builds), sum(b.seconds for b in builds))


def cost_by_stage(view: StudyView) -> tuple[list[int], dict[str, list[float]]]:
    """Seconds per stage for every trial with results (stacked bars)."""
    trials = [t for t in view.trials if t.result is not None]
    stages = [s for s in STAGE_ORDER if any(s in t.result.cost_by_stage for t in trials)]
    stages += sorted({s for t in trials for s in t.result.cost_by_stage} - set(stages))
    return [t.number for t in trials], {s: [t.result.cost_by_stage[s].seconds if s in t.result.cost_by_stage
                                            else 0.0 for t in trials] for s in stages}


def slices(view: StudyView) -> dict[str, list[tuple[Any, float]]]:
    """Per knob: (value, target) of every complete trial where the knob was searched."""
    if view.space is None:
        return {}
    out: dict[str, list[tuple[Any, float]]] = {}
    for name in view.space.params:
        points = [(t.params[name], t.values[0]) for t in view.trials
                  if t.state == "complete" and t.values and name in t.params]
        if points:
            out[name] = points
    return out


def deltas(analysis: Analysis) -> list[tuple[str, float]]:
    """Per-question best − baseline on the target, largest gain first."""
    head = analysis.headline
    if head is None:
        return []
    return sorted(head.differences.items(), key=lambda item: (-item[1], item[0]))


def wall_seconds(view: StudyView) -> float:
    """From the first trial's start to the last trial's end (includes time between runs of a resumed study)."""
    starts = [t.started for t in view.trials if t.started]
    ends = [t.finished for t in view.trials if t.finished]
    return (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0


def judge_at_chance(view: StudyView) -> str | None:
    """Why the study's judge is known to rank people's labels no better than chance, in words; None when it is not
    (or unknown). Read off the judge that scored its trials, under the study's verdict setting."""
    judges = {t.result.models.get("judge") for t in view.trials if t.result is not None} - {None, ""}
    setting = setting_name(view.project.evaluation)
    return next((said for judge in sorted(judges) if (said := at_chance(judge, setting))), None)


def self_judged(view: StudyView) -> list[int]:
    """The trials whose answers the judge's own model wrote: a model judging its own answers is known to favour
    them (self-preference), so their judged scores may flatter them beside other generators'."""
    return [t.number for t in view.trials if t.result is not None and t.result.models.get("judge")
            and t.result.models.get("generator") == t.result.models.get("judge")]


def front_points(view: StudyView) -> tuple[list[tuple[int, float, float]], set[int]]:
    """A two-target study's feasible complete trials as (number, first, second), and the front's numbers."""
    if len(view.targets) != 2:
        return [], set()
    done = [t for t in view.trials if t.state == "complete" and t.feasible and t.values]
    return [(t.number, t.values[0], t.values[1]) for t in done], {t.number for t in view.front}
