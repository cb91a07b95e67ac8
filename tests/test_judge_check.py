"""The judge checked on labelled cases from the user's data, and no free pass from an empty judgement."""

from __future__ import annotations

import json
import random
import re

import pytest

from tests.fakes import ScriptedLLM
from tests.helpers import SAMPLED
from tuner.config import EvaluationConfig, ProjectConfig
from tuner.data import load_dataset
from tuner.errors import ConfigError
from tuner.evaluation.judge.agreement import auc
from tuner.evaluation.judge.cases import (
    GENERATED_KINDS,
    HARD_KINDS,
    KINDS,
    build_cases,
    gold_texts,
    make_cases,
    partner,
    sources,
)
from tuner.evaluation.judge.check import MIN_AUC, JudgeCheck, check_judge, load_checks
from tuner.evaluation.rag_eval import RagRunner
from tuner.evaluation.ragas_judge import RagasScorer
from tuner.evaluation.records import EvalResult, Failure, QuestionResult, RetrievalTrace
from tuner.models.llms import Completion
from tuner.models.provider import Models
from tuner.workspace import open_workspace

#: the kinds built from the data (paraphrase needs a model; the labelled kinds come from people)
NO_PARAPHRASE = [k for k in KINDS if k not in GENERATED_KINDS and not k.startswith("labelled_")]


def prompt_input(messages) -> dict:
    """The input object RAGAS renders at the end of its prompt."""
    text = messages[-1]["content"]
    return json.loads(text.rsplit("input: ", 1)[1].rsplit("Output:", 1)[0])


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]{3,}", text.lower()))


class RandomJudge(ScriptedLLM):
    """Extracts the answer as one statement, then calls it supported by a coin toss (seeded by the prompt)."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        title = (json_schema or {}).get("title", "")
        data = prompt_input(messages) if json_schema else {}
        if title == "StatementGeneratorOutput":
            return Completion(json.dumps({"statements": [data["answer"]]}), 40, 8)
        if title == "NLIStatementOutput":
            coin = random.Random(messages[-1]["content"]).random() < 0.5
            return Completion(json.dumps({"statements": [{"statement": s, "reason": "", "verdict": int(coin)}
                                                         for s in data["statements"]]}), 40, 8)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


class OracleJudge(RandomJudge):
    """Supported exactly when the statement's words are (mostly) in the context; the question an answer
    answers is the answer itself reworded (so it resembles its own question more than another's)."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if (json_schema or {}).get("title") == "AnswerRelevanceOutput":
            response = prompt_input(messages)["response"]
            return Completion(json.dumps({"question": f"What about {response}?", "noncommittal": 0}), 40, 8)
        if (json_schema or {}).get("title") == "NLIStatementOutput":
            data = prompt_input(messages)
            verdicts = [{"statement": s, "reason": "", "verdict": int(len(words(s) - words(data["context"]))
                                                                     <= len(words(s)) // 4)}
                        for s in data["statements"]]
            return Completion(json.dumps({"statements": verdicts}), 40, 8)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


class EmptyJudge(ScriptedLLM):
    """Extracts no statement, ever (what the 1.5B judge sometimes answers at once)."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if (json_schema or {}).get("title") == "StatementGeneratorOutput":
            self.calls.append({"messages": messages, "json_schema": json_schema, "seed": seed,
                               "temperature": temperature})
            return Completion('{"statements": []}', 30, 5)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


@pytest.fixture
def demo():
    return load_dataset()


@pytest.fixture
def runner_for(tmp_path, fake_embedder):
    def make(llm, **evaluation):
        config = ProjectConfig(cache_dir=tmp_path / "cache", evaluation=EvaluationConfig(**{**SAMPLED, **evaluation}))
        return RagRunner(open_workspace(config, embedder=fake_embedder), models=Models(llm, llm))
    return make


def test_cases_are_deterministic_and_labelled_by_what_the_data_supports(demo):
    items = sources(demo, demo.questions, 8)
    metrics = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]
    cases = build_cases(items, metrics, NO_PARAPHRASE)
    assert cases == build_cases(sources(demo, demo.questions, 8), metrics, NO_PARAPHRASE)
    assert {c.kind for c in cases} == set(NO_PARAPHRASE)
    by_id = {s.question.id: (i, s) for i, s in enumerate(items)}
    for case in cases:
        index, source = by_id[case.question_id]
        other = partner(items, index)
        assert case.supported == KINDS[case.kind][0]
        assert not set(other.gold) & set(source.gold)  # the partner's answer cannot lean on these contexts
        own_gold = tuple(gold_texts(demo, source.question))
        if case.kind == "reference":
            assert case.answer == source.question.reference and case.contexts == own_gold
        elif case.kind == "context":
            assert case.answer in " ".join(" ".join(g.split()) for g in own_gold)
        elif case.kind == "other_answer":
            assert case.answer == other.question.reference and case.contexts == own_gold
        elif case.kind == "swapped":
            assert case.answer != source.question.reference
            assert set(re.findall(r"\d+", case.answer)) != set(re.findall(r"\d+", source.question.reference)) \
                or words(case.answer) - words(" ".join(own_gold))  # a number or a name the contexts do not hold
        elif case.kind == "subtle_change":  # one sentence, not the first, differs from the contexts' own
            said = re.split(r"(?<=[.!?])\s+", case.answer)
            held = [x for x in said if x in " ".join(" ".join(g.split()) for g in own_gold)]
            assert len(said) in (3, 4) and len(held) == len(said) - 1 and said[0] in held
        elif case.kind == "one_in_four":  # the partner's first sentence third among three of the contexts
            said = re.split(r"(?<=[.!?])\s+", case.answer)
            assert len(said) == 4 and other.answer.startswith(said[2])
            assert all(x in " ".join(" ".join(g.split()) for g in own_gold) for x in said[:2] + said[3:])
        elif case.kind == "wrong_question":
            assert case.question == other.question.text and case.answer == source.question.reference
        elif case.kind == "other_contexts":
            assert case.contexts == other.gold and case.reference == source.question.reference
        else:
            assert case.question == source.question.text and case.contexts == own_gold


def test_ragas_rows_bring_their_own_contexts(tmp_path):
    rows = [{"question": f"Q{i}?", "ground_truth": f"Answer {i}.", "contexts": [f"Passage {i} says answer {i}."]}
            for i in range(3)]
    (tmp_path / "set.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    data = load_dataset(tmp_path / "set.jsonl")
    assert gold_texts(data, data.questions[1]) == ("Passage 1 says answer 1.",)
    cases = build_cases(sources(data, data.questions, 3), ["faithfulness"], ["reference", "other_answer"])
    assert [(c.kind, c.answer) for c in cases[:2]] == [("reference", "Answer 0."), ("other_answer", "Answer 1.")]


def test_auc_counts_ties_half():
    assert auc([1, 1], [0, 0]) == 1.0 and auc([0, 0], [1, 1]) == 0.0 and auc([1, 0], [1, 0]) == 0.5
    assert auc([], [1]) is None


def test_a_judge_answering_at_random_gets_chance_auc_and_a_warning(demo, runner_for):
    runner = runner_for(RandomJudge())
    cases = make_cases(runner, demo, demo.questions, ["faithfulness"], 20, NO_PARAPHRASE)
    checked = check_judge(runner, cases)
    faith = checked.metrics["faithfulness"]
    assert faith.supported.cases + faith.unsupported.cases == len(cases) >= 60
    assert 0.3 < faith.auc < 0.7
    assert any("barely separates" in p for p in checked.problems)


def test_a_judge_that_reads_the_contexts_passes_the_check(demo, runner_for):
    runner = runner_for(OracleJudge())
    classic = [k for k in NO_PARAPHRASE if k not in HARD_KINDS]
    cases = make_cases(runner, demo, demo.questions, ["faithfulness", "answer_relevancy"], 20, classic)
    checked = check_judge(runner, cases, agreement=3)
    assert checked.metrics["faithfulness"].auc >= 0.9 and checked.metrics["faithfulness"].accuracy >= 0.85
    assert checked.metrics["answer_relevancy"].auc >= MIN_AUC  # own question beats another's
    assert checked.problems == []
    assert checked.metrics["faithfulness"].agreement_cases == 3 and checked.metrics["faithfulness"].agreement == 1.0
    again = JudgeCheck.from_json(json.loads(json.dumps(checked.to_json())))  # what the report reads back
    assert again.metrics["faithfulness"].auc == checked.metrics["faithfulness"].auc
    # the kinds modelled on real hallucinations catch what counting words misses: one number changed inside a long
    # answer, one foreign sentence among four
    hard = make_cases(runner, demo, demo.questions, ["faithfulness"], 20, ["reference", "context", *HARD_KINDS])
    harder = check_judge(runner, hard).metrics["faithfulness"]
    assert harder.by_kind["subtle_change"] > 0.5 and harder.auc < checked.metrics["faithfulness"].auc


def test_an_empty_judgement_is_re_asked_then_scored_unsupported_not_dropped(fake_embedder):
    judge = EmptyJudge()
    scorer = RagasScorer(judge, fake_embedder, EvaluationConfig(retries=2, **SAMPLED), max_tokens=64)
    outcome = scorer.score("faithfulness", "Which bridge?", "The Sorrel Bridge.", ["Sorrel Bridge."], None)
    assert outcome.value == 0.0 and outcome.failure == "empty"
    assert len(judge.calls) == 3
    first, *again = judge.calls
    assert "minItems" not in first["json_schema"]["properties"]["statements"]  # RAGAS's own schema: cache intact
    assert all(c["json_schema"]["properties"]["statements"]["minItems"] == 1 and c["temperature"] > 0 for c in again)

    judge.calls.clear()
    refusal = scorer.score("faithfulness", "Which bridge?", "I cannot answer from the given context.", ["x"], None)
    assert refusal.value is None and refusal.failure == "refusal" and len(judge.calls) == 1

    judge.calls.clear()
    old_rule = RagasScorer(judge, fake_embedder, EvaluationConfig(empty_judgement="exclude", **SAMPLED), max_tokens=64)
    excluded = old_rule.score("faithfulness", "Which bridge?", "The Sorrel Bridge.", ["Sorrel Bridge."], None)
    assert excluded.value is None and excluded.failure == "nan" and len(judge.calls) == 1


def test_an_empty_judgement_counts_in_the_mean_and_in_the_failures():
    def question(qid, score, failure=None):
        return QuestionResult(qid, "q", None, "a", ("c",), (), RetrievalTrace(), {"faithfulness": score},
                              {"faithfulness": Failure(failure)} if failure else {})

    result = EvalResult.summarise([question("a", 1.0), question("b", 0.0, "empty"), question("c", None, "nan")],
                                  ["faithfulness"], {}, cost=None, cost_by_stage={})
    assert result.metrics["faithfulness"] == 0.5  # the empty one counts as unsupported; the NaN one is left out
    assert result.failures["faithfulness"] == {"empty": 1, "nan": 1}


def test_an_empty_judge_shows_in_the_check_as_empty_not_unscored(demo, runner_for):
    runner = runner_for(EmptyJudge(), retries=1)
    checked = check_judge(runner, make_cases(runner, demo, demo.questions, ["faithfulness"], 4, NO_PARAPHRASE))
    faith = checked.metrics["faithfulness"]
    assert faith.supported.empty == faith.unsupported.empty == 1.0
    assert faith.supported.unscored == faith.unsupported.unscored == 0.0
    assert faith.supported.mean == 0.0 and faith.auc == 0.5 and checked.problems

    before = runner_for(EmptyJudge(), empty_judgement="exclude")
    dropped = check_judge(before, make_cases(before, demo, demo.questions, ["faithfulness"], 4, NO_PARAPHRASE))
    assert dropped.metrics["faithfulness"].supported.unscored == 1.0 and dropped.metrics["faithfulness"].auc is None


def test_strict_guard_refuses_to_start_and_leaves_no_study(tmp_path, fake_embedder):
    from tuner.cli.study import judge_display
    from tuner.study.optimize import StudySettings
    from tuner.study.session import Session, StudySpec

    space = tmp_path / "space.yaml"
    space.write_text("params:\n  top_k: {type: int, low: 2, high: 5}\n")
    judge = RandomJudge()

    def guarded(mode):
        def check(session):
            session.runner(models=Models(judge, judge), embedder=fake_embedder)
            judge_display(mode, tmp_path / "tuner.yaml", tmp_path / "data")(session)
        return check

    spec = StudySpec("s", StudySettings(["faithfulness"], sampler="random"), space, ProjectConfig(evaluation=SAMPLED),
                     studies_dir=tmp_path / "studies", cache_dir=tmp_path / "cache",
                     before_first_trial=guarded("strict"))
    with pytest.raises(ConfigError, match="judge check failed") as refused:
        Session.open(spec)
    folder = tmp_path / "studies" / "s"
    assert not (folder / "study.json").exists() and not (folder / "journal.log").exists()
    assert not (folder / "judge_check.json").exists()
    # the advice names a check that works without the study it refused to create: the same config, data, questions
    # and cases (tests/test_messages.py runs it)
    advice = re.search(r"see `(tuner judge check[^`]*)`", str(refused.value)).group(1)
    assert "--study" not in advice and re.fullmatch(
        rf"tuner judge check --quick --config {tmp_path / 'tuner.yaml'} --dataset {tmp_path / 'data'}"
        rf"( --holdout 0\.3)? --metrics faithfulness", advice), advice

    session = Session.open(StudySpec(**{**spec.__dict__, "before_first_trial": guarded("warn")}))
    assert (folder / "study.json").is_file()
    saved = load_checks(folder / "judge_check.json")
    assert saved and saved[0].problems
    assert len(saved[0].questions) == 3 and not set(saved[0].questions) & session.split.holdout_ids


@pytest.mark.slow
def test_real_judge_check_on_two_demo_questions(tmp_path, small_gguf):
    """The 0.5B judge through the CLI: cases built, scored, saved; a rerun is served by the cache."""
    import yaml

    from tests.helpers import tuner

    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {"model": "qwen2.5-0.5b",
                                                                       "path": str(small_gguf)}}))
    command = ["judge", "check", "--config", "tuner.yaml", "--n", "2", "--metrics", "faithfulness,answer_relevancy",
               "--agreement", "1", "--out", "check.json"]
    first = tuner(*command, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "AUC" in first.stdout and "Traceback" not in first.stderr
    check = json.loads((tmp_path / "check.json").read_text())["judges"][0]
    assert set(check["metrics"]) == {"faithfulness", "answer_relevancy"} and len(check["questions"]) == 2
    kinds = {(c["metric"], c["kind"]) for c in check["cases"]}
    assert {("faithfulness", "reference"), ("faithfulness", "paraphrase"), ("faithfulness", "other_answer"),
            ("answer_relevancy", "wrong_question")} <= kinds
    assert all(c["value"] is not None or c["failure"] for c in check["cases"])  # scored, or a named failure
    assert sum(c["paid_calls"] for c in check["cases"]) > 0
    assert sum(len(c["samples"]) == 2 for c in check["cases"]) == 2  # one case per metric under two seeds
    for metric in check["metrics"].values():
        assert metric["auc"] is None or 0 <= metric["auc"] <= 1

    again = tuner(*command, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    rerun = json.loads((tmp_path / "check.json").read_text())["judges"][0]
    assert sum(c["paid_calls"] for c in rerun["cases"]) == 0  # every judgement came from the cache
    assert [c["value"] for c in rerun["cases"]] == [c["value"] for c in check["cases"]]
