"""DSPy answer programs, the RAGAS judge wrapper and the full evaluation loop, on a scripted LLM."""

from __future__ import annotations

import json

import dspy
import pytest

from tests.fakes import ScriptedLLM
from tests.helpers import SAMPLED
from tuner.config import EvaluationConfig, PipelineConfig
from tuner.errors import ConfigError
from tuner.evaluation.ragas_judge import JudgeLLM, JudgeOutputError, RagasScorer, parse_reply
from tuner.models.llms import Completion
from tuner.prompts.lm import dspy_lm
from tuner.prompts.programs import NO_CONTEXT_ANSWER, load_program, program_id


def test_builtin_programs_differ_and_saved_programs_load(tmp_path):
    default, strict = load_program("default"), load_program("strict")
    assert program_id(default) != program_id(strict)
    assert "every sentence" in strict.respond.signature.instructions.lower()
    strict.save(str(tmp_path / "p.json"))
    assert program_id(load_program(str(tmp_path / "p.json"))) == program_id(strict)


def test_program_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_program(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a saved answer program"):
        load_program(str(tmp_path / "bad.json"))
    with pytest.raises(ConfigError, match="default, strict"):
        load_program("fancy")


def test_no_context_answers_without_calling_the_model():
    llm = ScriptedLLM()
    with dspy.context(lm=dspy_lm(llm, 64)):
        prediction = load_program("default")(question="Who?", contexts=[])
    assert prediction.answer == NO_CONTEXT_ANSWER and llm.calls == []


def test_program_prompt_numbers_contexts():
    llm = ScriptedLLM()
    with dspy.context(lm=dspy_lm(llm, 64)):
        answer = load_program("default")(question="Which bridge?", contexts=["A bridge.", "A river."]).answer
    assert answer == "The Sorrel Bridge [1]."
    assert "[1] A bridge.\n[2] A river." in llm.calls[0]["messages"][-1]["content"]


def test_parse_reply_tolerates_prose_and_rejects_garbage():
    from ragas.metrics.collections.context_precision.util import ContextPrecisionOutput

    parsed = parse_reply('Here you go:\n```json\n{"reason": "ok", "verdict": 1}\n```', ContextPrecisionOutput)
    assert parsed.verdict == 1
    with pytest.raises(JudgeOutputError):
        parse_reply("yes", ContextPrecisionOutput)


def test_garbage_judge_is_retried_then_counted_not_crashed(fake_embedder):
    garbage = ScriptedLLM(garbage=True)
    scorer = RagasScorer(garbage, fake_embedder, EvaluationConfig(retries=2, **SAMPLED), max_tokens=64)
    outcome = scorer.score("context_precision", "Which bridge?", "The Sorrel Bridge.", ["Sorrel Bridge."], "Sorrel")
    assert outcome.value is None and outcome.failure == "unparsable"
    assert len(garbage.calls) == 3  # first try + 2 re-asks, each a different sample
    assert len({(c["seed"]) for c in garbage.calls}) == 3


def test_repeated_prompts_within_a_sample_are_new_samples():
    llm = ScriptedLLM()
    judge = JudgeLLM(llm, retries=0, max_tokens=64)
    from ragas.metrics.collections.answer_relevancy.util import AnswerRelevanceOutput

    for _ in range(3):
        judge.generate("same prompt", AnswerRelevanceOutput)
    assert [c["seed"] for c in llm.calls] == [0, 100, 200]


def test_inputs_ragas_cannot_take_are_settled_first(fake_embedder):
    llm = ScriptedLLM()
    scorer = RagasScorer(llm, fake_embedder, EvaluationConfig(), max_tokens=64)
    assert scorer.score("faithfulness", "q?", "an answer", [], None).failure == "no_contexts"
    assert scorer.score("context_recall", "q?", "an answer", [], "ref").value == 0.0
    assert scorer.score("answer_relevancy", "q?", "  ", ["c"], None).failure == "no_answer"
    # a question without a reference answer (SQuAD 2's unanswerable ones): not an error, not judged
    assert scorer.score("context_precision", "q?", "an answer", ["c"], None).failure == "no_reference"
    assert llm.calls == []


def test_full_evaluation_scores_all_metrics_and_reruns_free(runner_factory):
    runner, llm = runner_factory()
    config = PipelineConfig(top_k=3)
    first = runner.evaluate(config)
    assert set(first.metrics) == {"faithfulness", "answer_relevancy", "context_precision", "context_recall"}
    assert all(value is not None for value in first.metrics.values())
    assert first.metrics["faithfulness"] == 1.0 and first.failures == {}
    assert first.cost.llm_calls > 0 and first.retrieval["questions_scored"] == 3
    question = first.questions[0]
    assert question.answer == "The Sorrel Bridge [1]." and question.citations == (1,)
    assert len(question.contexts) == 3 and set(question.cost) >= {"generate", "faithfulness"}
    # generation 1 + F 2 + AR 3 + CP 3 + CR 1 per question
    assert first.cost_by_stage["context_precision"].llm_calls == 9
    calls = len(llm.calls)
    second = runner.evaluate(config)
    assert len(llm.calls) == calls and second.cost.llm_calls == 0
    assert second.cost.cache_hits == first.cost.llm_calls + first.cost.cache_hits
    assert second.metrics == first.metrics


def test_disabled_cache_pays_again(runner_factory):
    runner, llm = runner_factory(limit=1, use_cache=False)
    runner.evaluate(PipelineConfig(top_k=2))
    calls = len(llm.calls)
    runner.evaluate(PipelineConfig(top_k=2))
    assert len(llm.calls) == 2 * calls


def test_reference_metrics_skipped_without_references(runner_factory, tmp_path):
    data = tmp_path / "noref.jsonl"
    data.write_text("\n".join(json.dumps({"question": f"Which bridge {i}?", "contexts": [f"The Sorrel Bridge {i}."]})
                              for i in range(2)))
    runner, _ = runner_factory(dataset=data)
    result = runner.evaluate(PipelineConfig(top_k=1))
    assert set(result.metrics) == {"faithfulness", "answer_relevancy"}
    assert set(result.skipped) == {"context_precision", "context_recall"}


def test_unparsable_generation_is_recorded(runner_factory):
    class Mute(ScriptedLLM):
        def _chat(self, messages, **kw):
            reply = super()._chat(messages, **kw)
            return reply if kw["json_schema"] is not None and "answer" not in json.dumps(kw["json_schema"]) else \
                type(reply)("", 1, 0)

    runner, _ = runner_factory(llm=Mute(), limit=1)
    result = runner.evaluate(PipelineConfig(top_k=2), metrics=["faithfulness"])
    assert result.failures["generation"] == {"unparsable": 1}
    assert result.failures["faithfulness"] == {"no_answer": 1}


def test_llm_reranker_gates_on_model_confidence(runner_factory):
    runner, llm = runner_factory(limit=2)
    config = PipelineConfig(top_k=5, reranker="llm", confidence_threshold=0.6, min_docs=1, max_docs=5)
    result = runner.evaluate(config, metrics=["faithfulness"])
    confidences = [c.confidence for q in result.questions for c in q.selected]
    assert all(0.0 <= c <= 1.0 for c in confidences)
    assert result.cost_by_stage["retrieve"].llm_calls > 0  # the reranker asked the model


def test_a_reply_cut_off_by_the_budget_is_re_asked_with_more_room():
    from ragas.metrics.collections.context_precision.util import ContextPrecisionOutput

    class Truncating(ScriptedLLM):
        def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
            self.calls.append({"max_tokens": max_tokens, "seed": seed})
            if max_tokens < 100:  # the verdict needs ~100 tokens: a smaller budget cuts it mid-JSON
                return Completion('{"reason": "the context names the bri', 40, max_tokens)
            return Completion('{"reason": "ok", "verdict": 1}', 40, 12)

    llm = Truncating()
    verdict = JudgeLLM(llm, retries=2, max_tokens=40).generate("prompt", ContextPrecisionOutput)
    assert verdict.verdict == 1
    assert [c["max_tokens"] for c in llm.calls] == [40, 80, 160]
