"""Checkers: what reads whether passages support a claim (`metrics/checkers`). Every kind, the judge's own P(yes)
included, runs the same contract cases; a new kind is tested by adding it to KINDS. Then the checker as a study
uses it: typed config, one-line errors, the judge's setting and the results naming it, and a real run."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import pytest

from tests.conftest import tiny_checker
from tests.fakes import FakeEndpoint, ScriptedLLM
from tests.helpers import ANSWER, CONTEXTS, judged_study_and_check, scorer, tuner
from tuner.config import CHECKER_KINDS, EvaluationConfig, ProjectConfig, describe_validation_error
from tuner.errors import ConfigError
from tuner.evaluation.judge.cut import judge_cut, setting_name
from tuner.metrics.checkers import Checker, make_checker
from tuner.metrics.graded import JudgeVerdicts

SUPPORTED = "The Sorrel Bridge crosses the Vell river at Dunmore."
INVENTED = "Gustave Eiffel painted the Sorrel arches purple in 1950."
SPLIT = ["The Sorrel Bridge crosses the Vell river.", "It stands at Dunmore."]


@functools.cache
def trained_checker(reads: str = "minicheck") -> str:
    """A tiny classifier the test writes, fitted to tell the contract's supported claim from its invented one."""
    folder = Path(tempfile.mkdtemp(prefix=f"tiny-checker-{reads}-"))
    return str(tiny_checker(folder, reads, [(CONTEXTS[0], SUPPORTED), (" ".join(SPLIT), SUPPORTED)],
                            [(CONTEXTS[0], INVENTED), ("", INVENTED)]))


#: a config of every kind a project may name (`config.CHECKER_KINDS`), by kind (made when a test asks)
CONFIGS = {"lexical": lambda: {"lexical": "words"}, "classifier": lambda: {"classifier": trained_checker()}}
#: the kinds whose config names weights (a tiny classifier the test trains): their cases are slow tests
WEIGHTS = {"classifier"}
#: every checker: the judge's own verdicts (a scripted judge here) and each kind a config names
KINDS = ["judge", *(pytest.param(kind, marks=pytest.mark.slow) if kind in WEIGHTS else kind for kind in CONFIGS)]


def checker_of(kind: str) -> Checker:
    if kind == "judge":
        return JudgeVerdicts(ScriptedLLM(), EvaluationConfig())
    return make_checker(EvaluationConfig(checker=CONFIGS[kind]()).checker)


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
    split = checker.supported(SPLIT, [SUPPORTED])
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
        "evaluation.checker: a checker names exactly one kind: lexical: words or facts or classifier: MODEL (a "
        "folder or Hub id)",
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


@pytest.mark.slow  # it trains and loads a tiny classifier
def test_a_classifier_reads_as_its_authors_read_it_cached_and_counted(tmp_path):
    """MiniCheck's reading (chunk, end token, claim; label 1) and an NLI model's (premise, hypothesis; its
    entailment label); each (chunk, claim) read once through the judge's cache and counted as a call."""
    from tuner.cache import SqliteStore
    from tuner.cost import CostMeter

    for reads in ("minicheck", "nli"):
        config = EvaluationConfig(checker={"classifier": trained_checker(reads), "reads": reads}).checker
        meter = CostMeter()
        checker = make_checker(config, SqliteStore(tmp_path / f"{reads}.sqlite"), meter)
        first = checker.supported(CONTEXTS, [SUPPORTED, INVENTED])
        assert first[0] > first[1] and checker.name == f"classifier:{trained_checker(reads)}"
        again = make_checker(config, SqliteStore(tmp_path / f"{reads}.sqlite"), meter).supported(
            CONTEXTS, [SUPPORTED, INVENTED])
        cost = meter.total()
        assert again == first and (cost.llm_calls, cost.cache_hits) == (2, 2) and cost.prompt_tokens > 0


@pytest.mark.slow  # it trains and loads a tiny classifier
def test_a_classifier_is_loaded_once_per_process_and_its_passes_share_one_lock():
    """A study builds a checker per graded metric per question in flight: each copy of MiniCheck would take its
    memory again, and each lock of its own would let their passes run at once on the same cores."""
    config = EvaluationConfig(checker={"classifier": trained_checker()}).checker
    first, second = make_checker(config), make_checker(config.model_copy(update={"chunk_words": 64}))
    assert first.model is second.model and first._lock is second._lock and first is not second
    assert second.supported(CONTEXTS, [SUPPORTED]) == first.supported(CONTEXTS, [SUPPORTED])


@pytest.mark.slow  # it trains and loads a tiny classifier
def test_a_classifier_that_cannot_be_read_is_one_line(tmp_path):
    said = []
    for checker in ({"classifier": str(tmp_path / "nowhere")},
                    {"classifier": trained_checker("minicheck"), "reads": "nli"},
                    {"classifier": trained_checker("nli"), "reads": "minicheck"}):
        with pytest.raises(ConfigError) as caught:
            make_checker(EvaluationConfig(checker=checker).checker)
        said.append(str(caught.value))
    assert said[0].startswith(f"checker classifier:{tmp_path / 'nowhere'}: cannot load the model (")
    assert said[0].endswith("give a folder with config.json, weights and tokenizer files, or a Hub id where the Hub "
                            "is reachable") and "\n" not in said[0]
    assert said[1] == (f"checker classifier:{trained_checker('minicheck')} reads nli, but its labels name no "
                       f"entailment (unsupported, supported): use reads: minicheck for a two-label checker")
    assert said[2] == (f"checker classifier:{trained_checker('nli')} reads minicheck (two labels, 1 = supported), "
                       f"but it has 3 (contradiction, entailment, neutral): use reads: nli for an NLI model")


@pytest.mark.slow  # it trains and loads a tiny classifier
def test_a_real_study_judged_by_a_classifier_and_its_check_on_labels(tmp_path):
    """`tuner optimize --target faithfulness` (2 trials, 3 demo questions, answers by a scripted endpoint) with the
    tiny classifier as checker, then `tuner judge check --labels` reading it; a checker that is not there stops
    before the first trial in one line."""
    model = trained_checker()
    studied, checked, metrics = judged_study_and_check(tmp_path, None, {"checker": {"classifier": model}})
    with FakeEndpoint("scripted", delay=0) as writer:
        endpoint = {"backend": "openai-compatible", "base_url": writer.url, "model": "m"}
        (tmp_path / "gone.yaml").write_text(json.dumps({"generator": endpoint, "judge": endpoint, "evaluation": {
            "checker": {"classifier": str(tmp_path / "gone")}}}))
        gone = tuner("optimize", "--config", "gone.yaml", "--study", "g", "--search-space", "quick", "--limit", "3",
                     "--target", "faithfulness", "--trials", "1", cwd=tmp_path)
    assert studied.returncode == 0, studied.stderr
    trials = [json.loads(p.read_text()) for p in sorted((tmp_path / "studies" / "s" / "trials").glob("*.json"))]
    assert len(trials) == 2 and all(t["models"]["checker"] == f"classifier:{model}" for t in trials)
    assert all(q["scores"]["faithfulness"] is not None for t in trials for q in t["per_question"])
    assert metrics["supported"]["cases"] == 6 and metrics["auc"] is not None
    # the tiny checker, fitted on bridges, gives these lighthouse answers 1.0 alike: no cut of 1.00 is offered to set
    assert f"{metrics['cut']:.2f}" == "1.00" and "evaluation.cut: 1.00" not in checked.stderr
    assert "the end of its scale, where no evaluation.cut can be set" in " ".join(checked.stderr.split())
    assert gone.returncode != 0 and "Traceback" not in gone.stderr
    assert f"checker classifier:{tmp_path / 'gone'}: cannot load the model (" in gone.stderr
