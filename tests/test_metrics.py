"""The metric registry is the one home of a metric's facts: every consumer has an entry for every metric, and a
computed metric scores through the same path as a judged one without a judge call."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from tests.fakes import ScriptedLLM
from tuner.config import EvaluationConfig
from tuner.evaluation import judge_check
from tuner.evaluation.metrics import ALL_METRICS, ANSWER_METRICS, INPUTS, REGISTRY, Computed, MetricSpec
from tuner.evaluation.ragas_judge import RagasScorer
from tuner.reports._data import STAGE_ORDER


@pytest.mark.parametrize("name", ALL_METRICS)
def test_every_consumer_has_an_entry_for_every_metric(name, fake_embedder):
    spec = REGISTRY[name]
    assert set(spec.needs) <= set(INPUTS), f"{name} needs an input no scorer is given"
    assert set(spec.check_kinds) <= set(judge_check.KINDS), f"{name} names a judge-check kind that does not exist"
    if spec.judged:  # the judge check can test it, and it fits the judge's window
        assert spec.check_kinds and spec.template_tokens > 0 and spec.calls >= 1
        assert {judge_check.KINDS[k][0] for k in spec.check_kinds} == {True, False}, "both classes are needed"
    assert EvaluationConfig(metrics=[name]).metrics == [name]
    assert name in STAGE_ORDER
    scorer = RagasScorer(ScriptedLLM(), fake_embedder, EvaluationConfig(), max_tokens=64).scorer(name)
    assert callable(scorer.ascore)
    assert set(spec.inputs("q", "a", ["c"], "r")) == {"user_input", *(INPUTS[n] for n in spec.needs)}


def test_derived_tables_follow_the_registry():
    assert {"faithfulness", "answer_relevancy"} <= set(ANSWER_METRICS)
    assert not {"context_precision", "context_recall"} & set(ANSWER_METRICS)  # retrieval decides them
    assert set(ALL_METRICS) == set(REGISTRY)
    assert EvaluationConfig().metrics == [name for name, spec in REGISTRY.items() if spec.default]
    with pytest.raises(ValidationError, match="faithfulness"):
        EvaluationConfig(metrics=["no_such_metric"])


def test_a_computed_metric_scores_without_a_judge_call(fake_embedder, monkeypatch):
    words = Computed(lambda response, **_: len(response.split()))
    length = MetricSpec("answer_length", ("answer",), lambda tools: words, "words in the answer", judged=False, calls=0)
    monkeypatch.setitem(REGISTRY, length.name, length)
    llm = ScriptedLLM()
    scorer = RagasScorer(llm, fake_embedder, EvaluationConfig(), max_tokens=64)
    assert scorer.score("answer_length", "q?", "three short words", ["c"], None).value == 3.0
    assert scorer.score("answer_length", "q?", " ", ["c"], None).failure == "no_answer"  # the answer rule holds
    assert llm.calls == []
    assert dataclasses.replace(length, needs=("reference",)).inputs("q", "a", [], "r") == {"user_input": "q",
                                                                                          "reference": "r"}
