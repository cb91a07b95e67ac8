"""The language models a project runs with, given to the pipeline and the evaluation when they are built.

A `ModelProvider` (one per workspace) knows which model each name means and loads it on first use, so a study that
scores retrieval alone loads none. `metered(cache, meter)` hands one run its own view: every model behind the
call cache and that run's cost meter, so two runs on one workspace never count each other's calls. Tests hand in
fakes here (`Models`), in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from tuner.cache import KeyValue
from tuner.config import ProjectConfig
from tuner.cost import CostMeter
from tuner.errors import ConfigError
from tuner.models.llms import LLM, CachedLLM, make_llm


@dataclass
class Models:
    """Models handed in by a caller instead of loaded from the config (tests hand in fakes)."""
    generator: LLM
    judge: LLM
    #: the generator knob's values, by name
    generators: dict[str, LLM] = field(default_factory=dict)


class ModelProvider:
    def __init__(self, project: ProjectConfig, given: Models | None = None):
        self.project = project
        self.given = given

    def generator(self, name: str | None = None) -> LLM:
        """The generator knob's model `name` (None: the project's generator), loaded once per process."""
        config = self.project.generator_named(name)
        if self.given is None:
            return make_llm(config)
        if name is None or config == self.project.generator:
            return self.given.generator
        if name not in self.given.generators:
            raise ConfigError(f"generator {name!r}: not among the models handed to this run")
        return self.given.generators[name]

    def judge(self) -> LLM:
        return self.given.judge if self.given is not None else make_llm(self.project.judge_llm)

    def metered(self, cache: KeyValue | None, meter: CostMeter) -> RunModels:
        return RunModels(self, cache, meter)


class RunModels:
    """One run's models: each behind the call cache and the run's cost meter, wrapped once and loaded on first
    use; their calls are cached under each model's own name."""

    def __init__(self, provider: ModelProvider, cache: KeyValue | None, meter: CostMeter):
        self.provider, self.cache, self.meter = provider, cache, meter
        self._generators: dict[str | None, CachedLLM] = {}

    def generator(self, name: str | None = None) -> CachedLLM:
        if name not in self._generators:
            self._generators[name] = CachedLLM(self.provider.generator(name), self.cache, self.meter)
        return self._generators[name]

    @cached_property
    def judge(self) -> CachedLLM:
        return CachedLLM(self.provider.judge(), self.cache, self.meter)
