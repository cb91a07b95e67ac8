"""Which knobs matter: Optuna's parameter importances (with `when:` knobs handled) and marginal effects.

A conditional knob only exists in the trials whose condition held, and Optuna's importances take only the
knobs present in every trial. So knobs are grouped by their condition: unconditional knobs are assessed over
all complete trials, each conditional group over the trials where its condition held, and the report says
which. Importances from few trials are noise (at 6 trials PED-ANOVA can miss the knob that decides the
target), so below MIN_TRIALS none are computed; marginal effects — the mean target per knob value — are
always shown, with the number of trials behind each.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.study.results import StudyView, TrialRecord
from tuner.study.space import Param

MIN_TRIALS = 8


@dataclass(frozen=True)
class KnobEffect:
    knob: str
    scope: str  # "all trials" or the condition under which the knob was searched
    trials: int  # complete trials in that scope
    importance: float | None  # share of the target's variance (PED-ANOVA); None: too few trials
    means: tuple[tuple[str, float, int], ...]  # (value or range, mean target, trials)
    best_value: Any  # the best trial's value (None: inactive there)

    @property
    def spread(self) -> float:
        """Largest minus smallest mean target over the knob's values: its marginal effect."""
        values = [m for _, m, _ in self.means]
        return max(values) - min(values) if len(values) > 1 else 0.0


def knob_effects(view: StudyView) -> list[KnobEffect]:
    """One entry per knob of the study's space, most important (then largest effect) first."""
    if view.space is None or len(view.targets) != 1:
        return []
    complete = [t for t in view.trials if t.state == "complete" and t.values]
    best = view.best
    groups: dict[tuple, list[str]] = {}
    for name, param in view.space.params.items():
        groups.setdefault(tuple(sorted((k, tuple(v) if isinstance(v, list) else (v,))
                                       for k, v in param.when.items())), []).append(name)
    effects = []
    for condition, names in groups.items():
        scope = [t for t in complete if all(n in t.params for n in names)]
        importances = _importances(scope, {n: view.space.params[n] for n in names})
        label = "all trials" if not condition else "trials where " + ", ".join(
            f"{k} in {list(v)}" for k, v in condition)
        for name in names:
            param = view.space.params[name]
            effects.append(KnobEffect(name, label, len(scope), importances.get(name) if importances else None,
                                      tuple(_marginal(scope, name, param)),
                                      best.params.get(name) if best else None))
    effects.sort(key=lambda e: (-(e.importance or 0.0), -e.spread, e.knob))
    return effects


def _importances(trials: Sequence[TrialRecord], params: dict[str, Param]) -> dict[str, float] | None:
    if len(trials) < MIN_TRIALS or len({t.values[0] for t in trials}) < 2:
        return None
    import optuna

    study = optuna.create_study(direction="maximize")
    distributions = {name: p.distribution() for name, p in params.items()}
    for t in trials:
        study.add_trial(optuna.trial.create_trial(
            params={n: t.params[n] for n in params}, distributions=distributions, value=t.values[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            found = optuna.importance.get_param_importances(study, params=list(params))
        except (ValueError, RuntimeError, ZeroDivisionError):
            return None
    return {name: float(value) for name, value in found.items()}


def _marginal(trials: Sequence[TrialRecord], name: str, param: Param) -> list[tuple[str, float, int]]:
    groups: dict[Any, list[float]] = {}
    for t in trials:
        groups.setdefault(_bucket(t.params[name], param), []).append(t.values[0])
    return [(label if isinstance(label, str) else f"{label:g}", sum(v) / len(v), len(v))
            for label, v in sorted(groups.items(), key=lambda item: _order(item[0], param))]


def _bucket(value: Any, param: Param) -> Any:
    """Categorical and small discrete knobs by value; wide numeric ranges by thirds."""
    if not param.numeric:
        return str(value)
    steps = (param.high - param.low) / (param.step or 1) if param.step or param.type == "int" else None
    if steps is not None and steps <= 8:
        return value
    third = (param.high - param.low) / 3
    index = min(2, int((value - param.low) / third)) if third else 0
    low = param.low + index * third
    return f"{low:.3g}–{low + third:.3g}"


def _order(label: Any, param: Param) -> Any:
    if param.type == "categorical":
        return [str(c) for c in param.choices].index(label) if label in [str(c) for c in param.choices] else 99
    return float(str(label).split("–")[0]) if isinstance(label, str) else label
