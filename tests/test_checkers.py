"""Checkers: what reads whether passages support a claim (`metrics/checkers`). Every kind, the judge's own P(yes)
included, runs the same contract cases; a new kind is tested by adding it to KINDS. Then the checker as a study
uses it: typed config, one-line errors, the judge's setting and the results naming it, and a real run."""

from __future__ import annotations

import json

import pytest

from tests.fakes import ScriptedLLM
from tests.helpers import ANSWER, CONTEXTS, scorer, tuner
from tuner.config import CHECKER_KINDS, EvaluationConfig, ProjectConfig, describe_validation_error
from tuner.errors import ConfigError
from tuner.evaluation.judge.cut import judge_cut, setting_name
from tuner.metrics.checkers import Checker, make_checker
from tuner.metrics.graded import JudgeVerdicts

#: a config of every kind a project may name (`config.CHECKER_KINDS`), by kind
CONFIGS = {"lexical": {"lexical": "words"}}
#: every checker: the judge's own verdicts (a scripted judge here) and each kind a config names
KINDS = ["judge", *CONFIGS]

SUPPORTED = "The Sorrel Bridge crosses the Vell river at Dunmore."
INVENTED = "Gustave Eiffel painted the Sorrel arches purple in 1950."


def checker_of(kind: str) -> Checker:
    if kind == "judge":
        return JudgeVerdicts(ScriptedLLM(), EvaluationConfig())
    return make_checker(EvaluationConfig(checker=CONFIGS[kind]).checker)


def test_every_kind_a_config_names_is_in_the_contract_cases():
    assert sorted(CONFIGS) == sorted(kind.kind for kind in CHECKER_KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_a_checker_gives_one_probability_per_statement_in_order(kind):
    checker = checker_of(kind)
    scores = checker.supported(CONTEXTS, [SUPPORTED, INVENTED])
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)
    assert scores[0] > scores[1]  # the passage's own sentence above an invented one
    assert checker.supported(CONTEXTS, [INVENTED, SUPPORTED]) == scores[::-1]  # each statement on its own
    assert checker.supported(CONTEXTS, []) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_checker_reads_no_passage_and_many_passages(kind):
    checker = checker_of(kind)
    alone = checker.supported([""], [INVENTED])
    assert len(alone) == 1 and 0.0 <= alone[0] <= 1.0
    split = checker.supported(["The Sorrel Bridge crosses the Vell river.", "It stands at Dunmore."], [SUPPORTED])
    assert len(split) == 1 and split[0] >= checker.supported(CONTEXTS, [INVENTED])[0]


@pytest.mark.parametrize("kind", KINDS)
def test_a_checker_is_named_and_repeats_itself(kind):
    checker = checker_of(kind)
    assert checker.name and checker.name == checker_of(kind).name
    assert checker.supported(CONTEXTS, [SUPPORTED, INVENTED]) == checker_of(kind).supported(CONTEXTS,
                                                                                             [SUPPORTED, INVENTED])


def test_the_lexical_checker_counts_words_or_facts():
    words = make_checker(EvaluationConfig(checker={"lexical": "words"}).checker)
    facts = make_checker(EvaluationConfig(checker={"lexical": "facts"}).checker)
    claim = "The bridge opened in 1893 at Dunmore."  # every word in the passage but the year
    assert words.supported(CONTEXTS, [claim]) == [0.75]  # bridge, opened, dunmore found; 1893 not
    assert facts.supported(CONTEXTS, [claim]) == [0.5]  # 1893 missing, Dunmore found
    assert facts.supported(CONTEXTS, ["Is that so?"]) == [1.0]  # states no fact: supported
    assert words.name == "lexical:words"


def test_a_checker_is_one_line_when_misconfigured():
    said = []
    for evaluation in ({"checker": {}}, {"checker": {"lexical": "nouns"}}, {"checker": {"lexical": "words", "x": 1}},
                       {"checker": {"lexical": "words"}, "verdict_prompt": "nli"},
                       {"checker": {"lexical": "words"}, "verdicts": "sampled"}):
        with pytest.raises(ValueError) as caught:
            ProjectConfig(evaluation=evaluation)
        said.append(describe_validation_error(caught.value))
    assert said == [
        "evaluation.checker: a checker names exactly one kind: lexical: words or facts",
        "evaluation.checker.lexical: Input should be 'words' or 'facts' (got 'nouns')",
        "evaluation.checker.x: unknown key",
        "evaluation: verdict_prompt is a setting of the judge's own verdicts; checker lexical:words reads the "
        "passages its own way",
        "evaluation: checker is a setting of graded verdicts (verdicts: graded)",
    ]


def test_faithfulness_and_recall_read_the_checker_and_the_judge_is_not_asked():
    llm = ScriptedLLM()
    judged = scorer(llm, checker={"lexical": "words"})
    outcome = judged.score("faithfulness", "Which bridge crosses the Vell?", ANSWER, CONTEXTS, None)
    assert llm.calls == []  # answer sentences, verdicts by the checker: no call at all
    sentences = ["The Sorrel Bridge crosses the Vell river.", "Gustave Eiffel painted the Sorrel arches purple."]
    expected = make_checker(EvaluationConfig(checker={"lexical": "words"}).checker).supported(CONTEXTS, sentences)
    assert outcome.value == pytest.approx(sum(expected) / 2) and expected[0] == 1.0 and expected[1] < 0.5
    recall = judged.score("context_recall", "Which bridge crosses the Vell?", ANSWER, CONTEXTS,
                          "The Sorrel Bridge crosses the Vell river.")
    assert recall.value == 1.0 and llm.calls == []


def test_a_checker_is_part_of_the_judge_s_setting_so_no_measured_cut_is_borrowed():
    checked = EvaluationConfig(checker={"lexical": "facts"})
    assert setting_name(checked) == "graded, sentences, checker lexical:facts"
    cut = judge_cut(checked, "qwen2.5-1.5b-instruct-q4_k_m-d5cde8a7e219b5f2", setting_name(checked))
    assert cut.value == 0.5 and "no cut is known" in cut.source


def test_a_study_judged_by_a_checker_records_it_and_refuses_a_resume_under_the_judge(tmp_path, cli_with):
    """End to end through `tuner optimize` (answers by the scripted generator): faithfulness is the checker's, the
    trial's result names it, and resuming under the judge's own verdicts is refused in one line."""
    (tmp_path / "checked.yaml").write_text("evaluation:\n  checker:\n    lexical: words\n")
    (tmp_path / "judged.yaml").write_text("{}\n")
    run = cli_with(ScriptedLLM())
    args = ("optimize", "--search-space", "quick", "--limit", "3", "--holdout", "0", "--judge-check", "off",
            "--target", "faithfulness", "--study", "c")
    first = run(*args, "--trials", "1", "--config", "checked.yaml")
    assert first.exit_code == 0, first.output
    trial = json.loads(next((tmp_path / "studies" / "c" / "trials").glob("*.json")).read_text())
    assert trial["models"]["checker"] == "lexical:words" and trial["metrics"]["faithfulness"] is not None
    again = run(*args, "--trials", "2", "--config", "judged.yaml")
    assert isinstance(again.exception, ConfigError)
    assert str(again.exception).startswith("study c judged with evaluation.checker = lexical:words, not None: its "
                                           "trials' scores are that judge's")


def test_a_real_study_judged_by_the_lexical_checker(tmp_path, small_gguf):
    """Real: the 0.5B writes the answers of 2 demo questions; the lexical checker scores their faithfulness."""
    (tmp_path / "tuner.yaml").write_text(f"generator:\n  path: {small_gguf}\n  n_ctx: 4096\n"
                                         "evaluation:\n  checker:\n    lexical: words\n")
    result = tuner("optimize", "--config", "tuner.yaml", "--search-space", "quick", "--limit", "2", "--holdout", "0",
                   "--judge-check", "off", "--target", "faithfulness", "--trials", "1", "--study", "real",
                   cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    trial = json.loads(next((tmp_path / "studies" / "real" / "trials").glob("*.json")).read_text())
    assert trial["models"]["checker"] == "lexical:words"
    scores = [q["scores"]["faithfulness"] for q in trial["per_question"]]
    assert len(scores) == 2 and all(s is not None and 0.0 <= s <= 1.0 for s in scores)
