"""Search spaces: YAML files naming pipeline knobs and their ranges, mapped onto Optuna's suggest_* calls.

    params:
      top_k: {type: int, low: 2, high: 10}
      alpha: {type: float, low: 0.0, high: 1.0, step: 0.1}
      reranker: {type: categorical, choices: [none, embedding]}
      confidence_threshold: {type: float, low: 0.3, high: 0.8, when: {reranker: [embedding, llm]}}

A `when:` parameter is only suggested when every named earlier parameter has one of the listed values;
otherwise the knob keeps the base config's value. Parameters are suggested in file order.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, TypeAdapter, ValidationError, ValidationInfo, model_validator

from tuner.config import (
    KNOBS,
    Knob,
    PipelineConfig,
    ProjectConfig,
    SystemConfig,
    SystemKnob,
    TrialConfig,
    _Strict,
    describe_validation_error,
    read_yaml,
)
from tuner.errors import ConfigError
from tuner.evaluation.answerers import answerer_kind
from tuner.models.check import check_embedder, check_fit

Scalar = int | float | str | bool | None
#: what tuner knows of a knob of the user's own system: nothing beyond it being the system's
SYSTEM_KNOB = Knob(carried="your system's own setting")
#: the largest grid `--sampler grid` takes: Optuna holds every point in memory (10^8 of them took 23 GB)
MAX_GRID_POINTS = 100_000


class Param(_Strict):
    type: Literal["int", "float", "categorical"]
    low: float | None = None
    high: float | None = None
    step: float | None = Field(None, gt=0)
    log: bool = False
    choices: list[Scalar] | None = None
    when: dict[str, Scalar | list[Scalar]] = {}

    @model_validator(mode="after")
    def _shape(self) -> Param:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("categorical needs a non-empty choices list")
            if self.low is not None or self.high is not None:
                raise ValueError("categorical takes choices, not low/high")
        else:
            if self.low is None or self.high is None:
                raise ValueError(f"{self.type} needs low and high")
            if self.low > self.high:
                raise ValueError(f"low ({self.low}) is above high ({self.high})")
            if self.log and (self.low <= 0 or self.step is not None):
                raise ValueError("log scale needs low > 0 and no step")
            if self.choices is not None:
                raise ValueError(f"{self.type} takes low/high, not choices")
        return self

    def values(self) -> list[Any]:
        """The values a bad knob value would hide among: the choices, or a range's two ends and its grid's last."""
        if self.type == "categorical":
            return list(self.choices or [])
        return [self.low, self.high]

    def takes(self, value: Any) -> bool:
        """Whether a draw from this parameter can be `value`."""
        if self.type == "categorical":
            return value in (self.choices or [])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
            return False
        return not self.step or abs((value - self.low) / self.step - round((value - self.low) / self.step)) < 1e-9

    def check_values(self, name: str, own: SystemKnob | None = None) -> None:
        """Every value this parameter can draw is one the knob accepts (`own`: a knob the user's system declares),
        and a step lands on `high`."""
        if self.type == "int" and any(v is not None and float(v) != int(v) for v in (self.low, self.high, self.step)):
            raise ValueError(f"params.{name}: an int parameter takes whole numbers for low, high and step")
        if self.step and not self.takes(self.high):
            raise ValueError(f"params.{name}: step {self.step:g} does not land on high ({self.low:g} + n × "
                             f"{self.step:g} never equals {self.high:g}): the grid would step past it")
        for value in self.values():
            value = int(value) if self.type == "int" else value
            if own is not None:
                try:
                    own.check(value)
                except ValueError as exc:
                    raise ValueError(f"params.{name}: {value!r} is not a value the system's {name} takes "
                                     f"({exc})") from None
                continue
            field = PipelineConfig.model_fields[name]  # the knob alone: cross-knob rules are checked per trial
            try:
                TypeAdapter(field.rebuild_annotation()).validate_python(value)
            except ValidationError as exc:
                raise ValueError(f"params.{name}: {value!r} is not a value {name} takes "
                                 f"({exc.errors()[0]['msg'].removeprefix('Value error, ')})") from None

    def condition_holds(self, chosen: dict[str, Any]) -> bool:
        for name, allowed in self.when.items():
            allowed_values = allowed if isinstance(allowed, list) else [allowed]
            if name not in chosen or chosen[name] not in allowed_values:
                return False
        return True

    def distribution(self) -> Any:
        """The Optuna distribution `suggest` draws from (to rebuild trials for importance analysis)."""
        import optuna.distributions as d

        if self.type == "categorical":
            return d.CategoricalDistribution(self.choices)
        if self.type == "int":
            return d.IntDistribution(int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return d.FloatDistribution(self.low, self.high, step=self.step, log=self.log)

    @property
    def numeric(self) -> bool:
        return self.type != "categorical"

    @property
    def single(self) -> bool:
        """Draws one value only: a knob a round fixed."""
        return len({str(v) for v in self.values()}) == 1

    def describe(self) -> str:
        if self.type == "categorical":
            return ", ".join(str(c) for c in self.choices or [])
        scale = " log" if self.log else f" step {self.step:g}" if self.step else ""
        return f"{self.low:g} … {self.high:g}{scale}"


@dataclass(frozen=True)
class Clash:
    knobs: tuple[str, ...]
    draw: str  # e.g. "autocut=2, confidence_threshold=0.65"
    reason: str


class SearchSpace(_Strict):
    """Validated against the knobs of what the project tunes (`SearchSpace.of(data, project)`): tuner's pipeline,
    or the knobs the project's own system declares."""

    description: str = ""
    params: dict[str, Param] = Field(min_length=1)
    #: the user's system whose knobs the space searches; None: tuner's built-in pipeline
    _system: SystemConfig | None = PrivateAttr(None)

    @classmethod
    def of(cls, data: Any, project: ProjectConfig | None = None) -> SearchSpace:
        """A space validated for `project` (None: tuner's pipeline); pydantic's ValidationError when it is none."""
        return cls.model_validate(data, context={"system": project and project.system})

    def derived(self, data: Any) -> SearchSpace:
        """Another space over the same knobs (a round's, one with compiled programs)."""
        return SearchSpace.model_validate(data, context={"system": self._system})

    @property
    def system(self) -> SystemConfig | None:
        return self._system

    @property
    def pipeline_knobs(self) -> bool:
        """Whether it searches tuner's own knobs, whose ranges, cross-knob rules and facts tuner knows (a system's
        knobs are its own to check)."""
        return self._system is None

    def facts(self, name: str) -> Knob:
        """What tuner knows about a knob the space names; a system's own knob is only the system's setting."""
        return KNOBS[name] if self.pipeline_knobs else SYSTEM_KNOB

    @model_validator(mode="after")
    def _every_value_is_one_the_knob_takes(self, info: ValidationInfo) -> SearchSpace:
        """Checked when the file loads, not when a trial first draws a bad value hours into a study."""
        system = self._system = (info.context or {}).get("system")
        knobs = set(system.knobs if system is not None else PipelineConfig.model_fields)
        for name, param in self.params.items():
            if name == "judge":
                raise ValueError("params.judge: the judge is fixed for a whole study (scores by two judges do not "
                                 "compare): set judge: in the project config; the generator knob varies the model "
                                 "that answers")
            if system is not None and name not in knobs:
                what = (f"a knob of tuner's built-in pipeline, which system {system.entry} does not run"
                        if name in PipelineConfig.model_fields else f"not a knob of system {system.entry}")
                raise ValueError(f"params.{name}: {what} (its knobs: {', '.join(sorted(knobs)) or 'none'}; "
                                 f"declare a knob under system.knobs to search it)")
            if name not in knobs:
                raise ValueError(f"params.{name}: not a pipeline knob (knobs: {', '.join(sorted(knobs))})")
            param.check_values(name, system.knobs[name] if system is not None else None)
            if name == "program" and system is None:  # a missing or foreign program file: now, not when drawn
                saved = [Path(v) for v in param.choices or [] if str(v).endswith(".json")]
                if saved:
                    from tuner.prompts.programs import check_saved_program

                    for path in saved:
                        try:
                            check_saved_program(path)
                        except ConfigError as exc:
                            raise ValueError(f"params.program: {exc}") from None
            for other, allowed in param.when.items():
                if other not in self.params or list(self.params).index(other) >= list(self.params).index(name):
                    raise ValueError(f"params.{name}.when: {other!r} must be a parameter defined above {name}")
                never = [v for v in (allowed if isinstance(allowed, list) else [allowed])
                         if not self.params[other].takes(v)]
                if never:
                    raise ValueError(f"params.{name}.when: {other} never takes {', '.join(map(str, never))} "
                                     f"({self.params[other].describe()}), so {name} would never be searched")
        return self

    def first_clash(self, base: PipelineConfig, project_check: Callable[[PipelineConfig], Any] | None = None
                    ) -> Clash | None:
        """A draw that is no valid pipeline from `base` (min_docs above max_docs, autocut beside a confidence
        threshold) or that `project_check` refuses (a chunk overlap not below the project's chunk size), or None
        when every draw is one. The pipeline's cross-knob rules each read two knobs, and a
        rule broken anywhere is broken at a range's end: so every pair of knobs is tried at its ends and choices,
        and where a knob's `when:` fails, at the base's value, which it then keeps."""
        names = list(self.params)
        tried: set[str] = set()
        for i, first in enumerate(names):
            for second in names[i:]:  # each knob alone too (against the base), then each pair
                involved = self._ancestors(first) | self._ancestors(second)
                for chosen in self._draws([n for n in names if n in involved]):
                    key = repr(sorted(chosen.items(), key=str))
                    if key in tried:
                        continue
                    tried.add(key)
                    try:
                        pipeline = base.with_params(chosen)
                        if project_check is not None:
                            project_check(pipeline)
                    except ConfigError as exc:
                        knobs = tuple(dict.fromkeys((first, second)))
                        shown = ", ".join(f"{n}={chosen[n]}" if n in chosen else f"{n}={base.knobs()[n]} (the "
                                          f"base's: its condition fails)" for n in knobs)
                        return Clash(knobs, shown, str(exc).removeprefix("trial parameters: "))
        return None

    def check_runnable(self, base: PipelineConfig, where: str,
                       project_check: Callable[[PipelineConfig], Any] | None = None) -> None:
        clash = self.first_clash(base, project_check)
        if clash is not None:
            raise ConfigError(f"{where}: a trial may draw {clash.draw}, which no pipeline takes ({clash.reason}); "
                              f"make the knobs' ranges or `when:` conditions exclude it")

    def check_for(self, project: ProjectConfig, where: str, baseline: Mapping[str, Any] | None = None) -> None:
        """What `tuner optimize` checks before any trial, and `tuner spaces show` too: every draw makes a pipeline
        the project can run, and trial 0 (the project's pipeline with `baseline`'s knobs; None: no trial 0 to run)
        is among the choices."""
        if self.pipeline_knobs:  # a system's knobs: whatever they do is the system's to check
            self.check_runnable(project.pipeline.tuners(), where, project.index_settings)
            self.check_models(project, where)
        if baseline is not None:
            self.check_baseline(answerer_kind(project).base(project).with_params(baseline), where)

    def check_models(self, project: ProjectConfig, where: str) -> None:
        """Every model a model knob can choose runs here (installed, a real GGUF file, an endpoint's model
        declared), and each generator fits in memory beside the judge."""
        def choices(name: str) -> list[Any]:
            param = self.params.get(name)
            return [v for v in param.values() if v is not None] if param is not None else []

        try:
            if choices("generator"):
                check_fit([project.generator_named(name) for name in choices("generator")], project.judge_llm, where)
            for name in choices("embedder"):
                check_embedder(name)
            for name in choices("reranker_model"):
                check_embedder(name, "reranker model")
        except ConfigError as exc:
            message = str(exc)
            raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None

    def check_baseline(self, baseline: TrialConfig, where: str) -> None:
        """Trial 0 runs the baseline through Optuna, which records a number outside a range but not a choice
        outside a categorical knob's choices."""
        drawn = self.drawn_from(baseline.knobs())
        foreign = [f"{n}={v}" for n, v in drawn.items() if self.params[n].type == "categorical"
                   and not self.params[n].takes(v)]
        if foreign:
            raise ConfigError(f"{where}: the baseline's {', '.join(foreign)} is not among the space's choices, so "
                              f"trial 0 cannot run it: add it to the choices (or set the project's pipeline to one)")

    def _ancestors(self, name: str) -> set[str]:
        found = {name}
        for other in self.params[name].when:
            found |= self._ancestors(other)
        return found

    def _draws(self, names: list[str]) -> list[dict[str, Any]]:
        """Every combination of the named knobs' ends and choices (file order), a knob left out where its
        condition fails."""
        draws: list[dict[str, Any]] = [{}]
        for name in names:
            param = self.params[name]
            values = [int(v) if param.type == "int" else v for v in param.values()]
            draws = [drawn for d in draws
                     for drawn in ([{**d, name: v} for v in values] if param.condition_holds(d) else [d])]
        return draws

    def with_programs(self, programs: Sequence[str]) -> SearchSpace:
        """The space with compiled programs (saved program paths) added to its `program` choices; unchanged
        when it has no categorical `program` knob or no program is given."""
        param = self.params.get("program")
        if not programs or param is None or param.type != "categorical":
            return self
        choices = list(dict.fromkeys([*(param.choices or []), *programs]))
        space = self.model_dump(exclude_defaults=True)
        space["params"]["program"]["choices"] = choices
        try:  # checked like the space's own choices: a compiled program deleted since is named now
            return self.derived(space)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc)) from None

    def models_first(self) -> SearchSpace | None:
        """Greedy-M's first round: the space of its model knobs that draw more than one value (with the knobs their
        `when:` reads); None when it searches no model, or nothing but models."""
        models = [n for n, p in self.params.items() if self.facts(n).model and not p.single]
        needed = set().union(*(self._ancestors(n) for n in models)) if models else set()
        if not models or all(self.facts(n).model for n in self.params):
            return None
        return self.derived({
            "description": f"the models first: {', '.join(models)}; every other knob at the base",
            "params": {n: p.model_dump(exclude_defaults=True) for n, p in self.params.items() if n in needed}})

    def around(self, chosen: Mapping[str, Any]) -> tuple[SearchSpace, list[str]]:
        """Greedy-M's next round: this space with each model knob fixed at `chosen`'s value (one choice, under its
        own `when:`), and the names of the model knobs so fixed; a model `chosen` does not name (its `when:` failed
        in the models' round) is searched with the rest."""
        params, fixed = {}, []
        for name, param in self.params.items():
            params[name] = param.model_dump(exclude_defaults=True)
            if self.facts(name).model and chosen.get(name) is not None and param.takes(chosen[name]):
                params[name] = {"type": "categorical", "choices": [chosen[name]],
                                **({"when": param.when} if param.when else {})}
                fixed.append(name)
        settled = ", ".join(f"{n}={chosen[n]}" for n in fixed)
        return self.derived({"description": f"around the models: {settled}", "params": params}), fixed

    def outside(self, values: dict[str, Any]) -> list[str]:
        """`values`' knobs that the space cannot draw (the baseline's top_k 5 in a 2-3 space), as `name=value`;
        a knob whose `when:` the values do not meet is not drawn, so it is never outside."""
        drawn = self.drawn_from(values)
        return [f"{name}={value}" for name, value in drawn.items() if not self.params[name].takes(value)]

    def drawn_from(self, values: dict[str, Any]) -> dict[str, Any]:
        """The parameters a trial reproducing `values` draws: those whose condition the values meet."""
        chosen: dict[str, Any] = {}
        for name, param in self.params.items():
            if name in values and param.condition_holds(chosen):
                chosen[name] = values[name]
        return chosen

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Ask an Optuna trial for every parameter whose condition holds, in file order."""
        chosen: dict[str, Any] = {}
        for name, p in self.params.items():
            if not p.condition_holds(chosen):
                continue
            if p.type == "categorical":
                chosen[name] = trial.suggest_categorical(name, p.choices)
            elif p.type == "int":
                chosen[name] = trial.suggest_int(name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
            else:
                value = trial.suggest_float(name, p.low, p.high, step=p.step, log=p.log)
                # Optuna's stepped floats carry float noise (0.7000000000000001); configs and best.yaml should not
                chosen[name] = round(value, 10) if p.step else value
        return chosen

    def grid(self) -> dict[str, list[Any]]:
        """Every value of every parameter, for Optuna's GridSampler (floats need a step). Optuna builds the whole
        product before the first trial: a grid larger than any study could run is refused, not materialised."""
        grid = self._grid_values()
        points = math.prod(len(values) for values in grid.values())
        if points > MAX_GRID_POINTS:
            sizes = " × ".join(f"{name} {len(values)}" for name, values in grid.items())
            raise ConfigError(f"--sampler grid: this space has {points:,} points ({sizes}), more than a study could "
                              f"ever run (at most {MAX_GRID_POINTS:,}); use --sampler tpe or random, or a space with "
                              f"fewer values")
        return grid

    def _grid_values(self) -> dict[str, list[Any]]:
        grid: dict[str, list[Any]] = {}
        for name, p in self.params.items():
            if p.type == "categorical":
                grid[name] = list(p.choices or [])
            elif p.type == "int":
                grid[name] = list(range(int(p.low), int(p.high) + 1, int(p.step or 1)))
            else:
                if not p.step:
                    raise ConfigError(f"--sampler grid needs a step for float parameter {name!r}")
                count = int(round((p.high - p.low) / p.step)) + 1
                grid[name] = [round(p.low + i * p.step, 10) for i in range(count)]
        return grid


def resolve_space(name: str) -> Path:
    """A path as given, else search_spaces/<name>.yaml here, in the tuner checkout, or where an install put them."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    for folder in (Path("search_spaces"), Path(__file__).resolve().parents[2] / "search_spaces",
                   Path(sys.prefix) / "share" / "tuner" / "search_spaces"):
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    raise ConfigError(f"search space {name!r}: no file {name} or search_spaces/{name}.yaml")


def load_space(path: Path | str, project: ProjectConfig | None = None) -> SearchSpace:
    """The space in a YAML file, over the knobs of what `project` tunes (None: tuner's pipeline)."""
    path = Path(path)
    raw = read_yaml(path)
    try:
        return SearchSpace.of(raw, project)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc)}") from None
