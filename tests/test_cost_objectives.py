"""Cost as an objective: seconds and tokens per question as on a cold cache, context tokens, cost guards, Pareto
studies minimising a cost, the cheapest trial within noise of the best, and `--estimate` (scripted LLM)."""

from __future__ import annotations

import time

import optuna
import pytest

from tests.fakes import ScriptedLLM
from tests.helpers import open_session
from tuner.config import ProjectConfig
from tuner.errors import ConfigError
from tuner.evaluation.records import QuestionResult
from tuner.models.provider import Models
from tuner.reports import write_report
from tuner.study.estimate import estimate_study
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study

TOP_K = {"params": {"top_k": {"type": "int", "low": 1, "high": 5}}}


class SlowAnswers(ScriptedLLM):
    """Takes 20 ms to answer (not to judge): the pipeline's seconds are measurable and known."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if json_schema is None:
            time.sleep(0.02)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


def question(cost: dict, context_tokens: int | None = 250) -> QuestionResult:
    return QuestionResult.from_json({"id": "q1", "cost": cost, "context_tokens": context_tokens})


def test_a_questions_cost_is_the_pipelines_as_on_a_cold_cache():
    q = question({"retrieve": {"seconds": 0.01}, "query": {"seconds": 1.5, "llm_calls": 1, "prompt_tokens": 80,
                                                          "completion_tokens": 20, "model_seconds": 1.5},
                  "generate": {"seconds": 0.001, "cache_hits": 1, "cached_tokens": 300, "saved_seconds": 4.0},
                  "faithfulness": {"seconds": 10.0, "llm_calls": 2, "prompt_tokens": 900}})  # the judge's: not counted
    assert q.value("seconds_per_question") == pytest.approx(0.01 + 1.5 + 0.001 + 4.0)
    assert q.value("tokens_per_question") == 100 + 300
    assert q.value("context_tokens") == 250
    unknown = question({"generate": {"seconds": 0.001, "cache_hits": 1, "unmetered_hits": 1}}, None)
    assert unknown.value("seconds_per_question") is None and unknown.value("context_tokens") is None
    assert unknown.value("tokens_per_question") == 0  # known: the cache keeps every call's tokens


def test_an_evaluations_costs_do_not_depend_on_the_cache(runner_factory):
    runner, _ = runner_factory(llm=SlowAnswers())
    from tuner.config import PipelineConfig

    first = runner.evaluate(PipelineConfig(top_k=3), metrics=["faithfulness"])
    again = runner.evaluate(PipelineConfig(top_k=3), metrics=["faithfulness"])  # every call from the cache
    assert again.cost.llm_calls == 0
    for metric in ("tokens_per_question", "context_tokens"):
        assert again.value(metric) == first.value(metric) > 0
    assert first.value("seconds_per_question") >= 0.02  # the answer's 20 ms, the judge's time left out
    # served from the cache in a millisecond, the answer still costs the 20 ms it took when paid
    assert again.value("seconds_per_question") >= 0.02
    fewer = runner.evaluate(PipelineConfig(top_k=1), metrics=["faithfulness"])
    assert fewer.value("context_tokens") < first.value("context_tokens")


def test_a_cost_alone_is_not_a_target_and_a_pareto_study_minimises_it():
    with pytest.raises(ConfigError, match="a cost alone is cheapest when nothing is retrieved"):
        StudySettings(["seconds_per_question"])
    StudySettings(["faithfulness", "seconds_per_question"])  # a Pareto front: accepted


def test_a_pareto_study_of_quality_and_context_tokens(tmp_path, fake_embedder):
    session = open_session(tmp_path, fake_embedder, TOP_K, targets=("faithfulness", "context_tokens"),
                           sampler="grid")
    session.run(6)
    assert session.study.directions == [optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE]
    view = read_study(session.folder)
    done = [t for t in view.trials if t.state == "complete"]
    fewest = min(done, key=lambda t: t.values[1])
    assert fewest.params["top_k"] == 1  # fewer contexts, fewer tokens
    # every answer is judged faithful: top_k 1 is as good and cheapest, the only trial on the front
    assert [t.number for t in view.front] == [fewest.number]
    report = write_report(view, tmp_path / "report")
    text = report.path.read_text()
    assert "context_tokens minimised" in text and "![Pareto front](front.png)" in text
    assert (tmp_path / "report" / "front.png").is_file()
    cheapest = report.analysis.cheapest
    assert cheapest.cost == "context_tokens" and cheapest.cheapest.number == fewest.number
    assert "Cheapest within noise of the best" in text


def test_a_cost_guard_keeps_the_best_within_budget(tmp_path, fake_embedder):
    session = open_session(tmp_path, fake_embedder, TOP_K, sampler="grid", constraints=("context_tokens<=120",))
    session.run(6)
    view = read_study(session.folder)
    costs = {t.number: t.result.value("context_tokens") for t in view.trials if t.state == "complete"}
    assert max(costs.values()) > 120 >= min(costs.values())  # the guard cuts the grid in two
    assert costs[view.best.number] <= 120
    # the report names the cheapest configuration within noise of the best by the guarded cost
    analysis = write_report(view, tmp_path / "report").analysis
    assert analysis.cheapest.cost == "context_tokens"


def test_the_estimate_scales_the_baseline_to_the_study(tmp_path, fake_embedder):
    llm = SlowAnswers()
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    settings = StudySettings(["faithfulness"])
    told = estimate_study(project, settings, 10, 0.5, limit=8, models=Models(llm, llm), embedder=fake_embedder)
    assert (told.sampled, told.search, told.held_out, told.trials) == (4, 4, 4, 10)
    assert told.questions == 10 * 4 + 2 * 4
    paid = len(llm.calls)
    assert told.paid_now == paid > 0 and told.calls_per_question == pytest.approx(paid / 4)
    assert told.calls == pytest.approx(told.calls_per_question * told.questions)
    assert told.seconds_per_question >= 0.02  # the answer's 20 ms, and the judge's time (it costs the study too)
    again = estimate_study(project, settings, 10, 0.5, limit=8, models=Models(llm, llm), embedder=fake_embedder)
    assert again.paid_now == 0 and len(llm.calls) == paid  # cached: the same estimate, paid once
    assert again.calls_per_question == told.calls_per_question and again.tokens == told.tokens


def test_the_estimate_measures_the_study_s_trial_1_after_its_trial_0(tmp_path, fake_embedder):
    """Given the space, the estimate runs the sampler's first draw after the baseline on the same questions: the
    knobs the study's own trial 1 then runs, at a pace that counts later trials' reuse of what trial 0 computed."""
    import yaml

    from tuner.study.space import load_space

    space = {"params": {"top_k": {"type": "int", "low": 1, "high": 6}, "alpha": {"type": "float", "low": 0.0,
                                                                                    "high": 1.0}}}
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))  # as the study's own file
    llm = SlowAnswers()
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    settings = StudySettings(["faithfulness"], [], "tpe", 0, prune_after=2)
    told = estimate_study(project, settings, 6, 0.0, limit=6, models=Models(llm, llm), embedder=fake_embedder,
                          space=load_space(tmp_path / "space.yaml", project))
    assert told.later_params is not None and told.later_seconds_per_question >= 0.02
    assert told.seconds == pytest.approx(told.seconds_per_question * told.search
                                               + told.later_seconds_per_question * 5 * told.search)
    session = open_session(tmp_path, fake_embedder, space, limit=6, llm=SlowAnswers())
    session.run(2)
    trial_1 = next(t for t in read_study(session.folder).trials if t.number == 1)
    assert trial_1.params == told.later_params
