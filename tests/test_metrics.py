"""The metric registry is the one home of a metric's facts: every consumer has an entry for every metric, and a
computed metric scores through the same path as a judged one without a judge call."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from tests.fakes import ScriptedLLM
from tests.helpers import question
from tuner.analysis.stages import attribute
from tuner.config import EvaluationConfig
from tuner.evaluation.judge import cases as judge_cases
from tuner.evaluation.rag_eval import score_refusal
from tuner.evaluation.ragas_judge import Outcome, RagasScorer
from tuner.evaluation.retrieval_metrics import question_metrics
from tuner.metrics import (
    ANSWER_METRICS,
    COST_METRICS,
    INPUTS,
    REGISTRY,
    RETRIEVAL_METRICS,
    SCORED_METRICS,
    TARGETS,
    Computed,
    MetricSpec,
    lower_is_better,
)
from tuner.reports._data import STAGE_ORDER


@pytest.mark.parametrize("name", SCORED_METRICS)
def test_every_consumer_has_an_entry_for_every_metric(name, fake_embedder):
    spec = REGISTRY[name]
    assert set(spec.needs) <= set(INPUTS), f"{name} needs an input no scorer is given"
    assert set(spec.check_kinds) <= set(judge_cases.KINDS), f"{name} names a judge-check kind that does not exist"
    if spec.judged:  # the judge check can test it, and it fits the judge's window
        assert spec.check_kinds and spec.template_tokens > 0 and spec.calls >= 1
        assert {judge_cases.KINDS[k][0] for k in spec.check_kinds} == {True, False}, "both classes are needed"
    assert EvaluationConfig(metrics=[name]).metrics == [name]
    assert name in STAGE_ORDER
    scorer = RagasScorer(ScriptedLLM(), fake_embedder, EvaluationConfig(), max_tokens=64).scorer(name)
    assert callable(scorer.ascore)
    assert set(spec.inputs("q", "a", ["c"], "r")) == {"user_input", *(INPUTS[n] for n in spec.needs)}


def test_derived_tables_follow_the_registry():
    assert {"faithfulness", "answer_relevancy"} <= set(ANSWER_METRICS)
    assert not {"context_precision", "context_recall"} & set(ANSWER_METRICS)  # retrieval decides them
    assert set(SCORED_METRICS) == {name for name, spec in REGISTRY.items() if spec.kind in ("judged", "computed")}
    assert EvaluationConfig().metrics == [name for name, spec in REGISTRY.items() if spec.default]
    with pytest.raises(ValidationError, match="faithfulness"):
        EvaluationConfig(metrics=["no_such_metric"])


def test_a_computed_metric_scores_without_a_judge_call(fake_embedder, monkeypatch):
    words = Computed(lambda response, **_: len(response.split()))
    length = MetricSpec("answer_length", ("answer",), lambda tools: words, "words in the answer", kind="computed",
                        calls=0, high=None)  # a count: its range has no top
    monkeypatch.setitem(REGISTRY, length.name, length)
    llm = ScriptedLLM()
    scorer = RagasScorer(llm, fake_embedder, EvaluationConfig(), max_tokens=64)
    assert scorer.score("answer_length", "q?", "three short words", ["c"], None).value == 3.0
    assert scorer.score("answer_length", "q?", " ", ["c"], None).failure == "no_answer"  # the answer rule holds
    assert llm.calls == []
    assert dataclasses.replace(length, needs=("reference",)).inputs("q", "a", [], "r") == {"user_input": "q",
                                                                                          "reference": "r"}


def test_every_metric_has_one_spec_with_its_range_and_direction():
    assert set(TARGETS) == set(REGISTRY) and set(SCORED_METRICS) | set(RETRIEVAL_METRICS) | set(COST_METRICS) == \
        set(TARGETS)
    assert RETRIEVAL_METRICS == tuple(question_metrics(["d1"], ["d1"], ["d1"], 1))  # the metrics tuner computes
    assert all(lower_is_better(m) for m in COST_METRICS) and not any(map(lower_is_better, RETRIEVAL_METRICS))
    assert all(REGISTRY[m].high is None for m in COST_METRICS)
    assert all(REGISTRY[m].build is None for m in (*RETRIEVAL_METRICS, *COST_METRICS))


def _word_count(monkeypatch, **scale) -> MetricSpec:
    spec = MetricSpec("word_count", ("answer",), lambda tools: Computed(lambda response, **_: len(response.split())),
                      "words in the answer", kind="computed", calls=0, **scale)
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    return spec


def test_a_metric_outside_0_to_1_is_analysed_by_its_own_range_and_direction(monkeypatch):
    _word_count(monkeypatch, high=100.0, lower_is_better=True)
    questions = [question("short", None), question("long", None), question("unscored", None),
                 question("retrieval", None, gold=("d1", "d2"), pool=("d1",), selected=("d1",), rank=7)]
    for q, words in zip(questions, (0.0, 40.0, None, 10.0)):
        q.scores["word_count"] = words
    shares = attribute(questions, "word_count")
    # 0 words is the best: nothing lost; 40 words lose 40; unscored loses the whole range, 100
    assert {q.question_id: q.loss for q in shares.losses} == {"long": 40.0, "unscored": 100.0, "retrieval": 10.0}
    assert shares.total == 150.0 and shares.limiting == "judge" and shares.caption == "limiting stage: judge"
    # a refusal scores the metric's worst, not a 0 that would be its best
    refused = score_refusal({"word_count": Outcome(3.0)}, "zero", answerable=True)["word_count"]
    assert refused.value == 100.0 and "100 by evaluation.refusal" in refused.detail


def test_a_metric_with_no_best_value_or_a_cost_is_said_not_attributed(monkeypatch):
    _word_count(monkeypatch, high=None)  # more words are better, without end: no shortfall to measure
    questions = [question("a", None)]
    questions[0].scores["word_count"] = 12.0
    shares = attribute(questions, "word_count")
    assert shares.losses == () and shares.limiting is None
    assert shares.caption == "not attributed to stages: word_count has no best value (0 to ∞, higher is better): " \
                             "no question's shortfall can be measured"
    assert "is a cost" in attribute(questions, "seconds_per_question").caption
    assert score_refusal({"word_count": Outcome(3.0)}, "zero", answerable=True)["word_count"].value == 0.0
    _word_count(monkeypatch, high=None, lower_is_better=True)  # fewer is better, no worst: a refusal is left out
    refused = score_refusal({"word_count": Outcome(3.0)}, "zero", answerable=True)["word_count"]
    assert refused.value is None and "left out, as the metric has no worst value" in refused.detail


def test_a_score_outside_its_declared_range_fails_that_question_naming_the_range(fake_embedder, monkeypatch):
    spec = MetricSpec("overshoot", ("answer",), lambda tools: Computed(lambda response, **_: 1.7), "a share gone wrong",
                      kind="computed", calls=0)
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    scorer = RagasScorer(ScriptedLLM(), fake_embedder, EvaluationConfig(), max_tokens=64)
    outcome = scorer.score("overshoot", "q?", "an answer", ["c"], None)
    assert (outcome.value, outcome.failure, outcome.detail) == (
        None, "out_of_range", "overshoot gave 1.7, outside its declared range 0 to 1")
    _word_count(monkeypatch, high=None)
    assert scorer.score("word_count", "q?", "three short words", ["c"], None).value == 3.0  # no upper bound


def test_a_computed_metric_s_own_error_is_raised_as_a_defect_not_a_failed_question(fake_embedder, monkeypatch):
    spec = MetricSpec("broken", ("answer",), lambda tools: Computed(lambda response, **_: len(response) / None),
                      "a metric with a bug", kind="computed", calls=0)
    monkeypatch.setitem(REGISTRY, spec.name, spec)
    scorer = RagasScorer(ScriptedLLM(), fake_embedder, EvaluationConfig(), max_tokens=64)
    with pytest.raises(TypeError):
        scorer.score("broken", "q?", "an answer", ["c"], None)
