"""Graded faithfulness verdicts: P(supported) per statement from one token, contexts first, one setting away from
RAGAS's sampled verdicts; the judge check compares the settings and says which to use."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re

import pytest

from tests.fakes import FakeEndpoint, ScriptedLLM
from tests.helpers import ANSWER, CONTEXTS, scorer, tuner
from tuner.config import EvaluationConfig, ProjectConfig
from tuner.cost import CostMeter
from tuner.evaluation.judge.agreement import auc, auc_interval, balanced_accuracy, best_cut, cross_validated
from tuner.evaluation.judge.cases import Case
from tuner.evaluation.judge.check import CaseScore, JudgeCheck, MetricCheck, choose, load_checks
from tuner.evaluation.judge.cut import Cut, judge_cut, overstatement, setting_name
from tuner.metrics.graded import answer_sentences
from tuner.models.llms import CachedLLM
from tuner.models.llms._openai import OpenAICompatibleLLM
from tuner.models.registry import NAMED_MODELS, OnPeople


def test_graded_faithfulness_is_the_mean_probability_over_the_answer_s_sentences():
    llm = ScriptedLLM()
    outcome = scorer(llm, verdicts="graded", statements="sentences").score(
        "faithfulness", "Which bridge crosses the Vell?", ANSWER, CONTEXTS, None)
    verdicts = [c for c in llm.calls if c.get("reuse_prefix")]
    assert len(verdicts) == 2 and not [c for c in llm.calls if c["json_schema"]]  # sentences: no statement call
    # every verdict of the question starts with its contexts: one prefix, computed once in process
    assert all(c["messages"][-1]["content"].startswith(f"Context:\n{CONTEXTS[0]}\n\nStatement: ") for c in verdicts)
    supported, invented = (float(ScriptedLLM().yes_probability(c["messages"]).text) for c in verdicts)
    assert supported == 1.0 and invented < 0.5
    assert outcome.value == pytest.approx((supported + invented) / 2) and outcome.failure is None


def test_graded_verdicts_can_check_the_judge_s_own_statements_and_feed_compile():
    llm = ScriptedLLM()
    graded = scorer(llm, verdicts="graded", statements="judge")
    outcome = graded.score("faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
    assert [c["json_schema"]["title"] for c in llm.calls if c["json_schema"]] == ["StatementGeneratorOutput"]
    # the scripted statement, "The bridge is the Sorrel Bridge.": supported, as the scripted NLI verdict says
    assert outcome.value == 1.0 and llm.calls[-1]["reuse_prefix"]
    reply = graded.judge.replies[-1]  # what compile reads for its feedback on unsupported statements
    assert [(s.statement, s.verdict) for s in reply.statements] == [("The bridge is the Sorrel Bridge.", 1)]


def test_graded_on_sentences_is_the_default_and_sampled_is_ragas_one_setting_away():
    assert (EvaluationConfig().verdicts, EvaluationConfig().statements) == ("graded", "sentences")
    llm = ScriptedLLM()
    scorer(llm, verdicts="sampled").score("faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
    titles = [c["json_schema"]["title"] for c in llm.calls if c["json_schema"]]
    assert titles == ["StatementGeneratorOutput", "NLIStatementOutput"]  # RAGAS's own statements and verdicts
    assert EvaluationConfig(verdicts="sampled").statements == "judge"
    with pytest.raises(ValueError, match="statements: sentences needs verdicts: graded"):
        EvaluationConfig(verdicts="sampled", statements="sentences")
    with pytest.raises(ValueError, match="verdict_prompt is a setting of graded verdicts"):
        EvaluationConfig(verdicts="sampled", verdict_prompt="nli")


PASSAGES = ["The Sorrel Bridge crosses the Vell river at Dunmore.", "   ",
            "The bridge opened in 1892 with purple arches."]
CLAIM = "The Sorrel Bridge opened in 1892. Its arches were painted purple by Dunmore masons."


def test_graded_verdicts_on_each_passage_take_the_best_and_compute_each_passage_s_prefix_once():
    llm = ScriptedLLM()
    each = scorer(llm, verdict_contexts="each").score("faithfulness", "When?", CLAIM, PASSAGES, None)
    prompts = [c["messages"][-1]["content"] for c in llm.calls]
    # the blank passage is left out; both sentences on the first passage, then both on the last: two prefixes
    assert [p.split("\n\nStatement: ")[0] for p in prompts] == [f"Context:\n{PASSAGES[0]}"] * 2 + \
        [f"Context:\n{PASSAGES[2]}"] * 2
    grades = [float(ScriptedLLM().yes_probability([{"role": "user", "content": p}]).text) for p in prompts]
    assert each.value == pytest.approx((max(grades[0], grades[2]) + max(grades[1], grades[3])) / 2)
    joined = scorer(ScriptedLLM()).score("faithfulness", "When?", CLAIM, PASSAGES, None)
    assert each.value != joined.value  # one verdict on all passages at once is another setting, and another score


def test_chunks_pack_short_passages_split_long_ones_between_sentences_and_take_the_best(monkeypatch):
    """MiniCheck's reading of long evidence: chunks of at most CHUNK_WORDS words, the claim's verdict the best."""
    from tuner.metrics import graded
    from tuner.text import word_chunks

    long = " ".join(f"Sentence {n} says the bridge has {n} arches." for n in range(30))  # 8 words a sentence
    chunks = word_chunks(["Short one.", "Short two.", long], 50)
    assert chunks[0].startswith("Short one. Short two. Sentence 0 says")
    assert all(len(c.split()) <= 50 for c in chunks) and len(chunks) == 6  # 4 + 5 × 8 words, then 6 × 8
    assert all(c.endswith(".") for c in chunks)  # split between sentences
    assert " ".join(chunks).split() == "Short one. Short two. {}".format(long).split()  # nothing lost or repeated
    assert word_chunks(["x " * 120], 50) == ["x " * 49 + "x"] * 2 + ["x " * 19 + "x"]  # a sentence longer than one
    assert word_chunks([], 50) == [""]

    monkeypatch.setattr(graded, "CHUNK_WORDS", 12)
    llm = ScriptedLLM()
    chunked = scorer(llm, verdict_contexts="chunks").score("faithfulness", "When?", CLAIM, PASSAGES, None)
    contexts = [c["messages"][-1]["content"].split("\n\nStatement: ")[0] for c in llm.calls]
    # the first passage (9 words) alone, the last (8) alone: 17 words do not fit 12; both sentences on each
    assert contexts == [f"Context:\n{PASSAGES[0]}"] * 2 + [f"Context:\n{PASSAGES[2]}"] * 2
    assert 0 <= chunked.value <= 1
    assert setting_name(EvaluationConfig(verdict_contexts="chunks")) == "graded, sentences, chunks"


def test_the_nli_verdict_asks_whether_every_detail_of_the_claim_is_in_the_document():
    llm = ScriptedLLM()
    scorer(llm, verdict_prompt="nli", metrics=["faithfulness", "context_recall"]).score(
        "context_recall", "Which bridge?", ANSWER, CONTEXTS, REFERENCE)
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert prompt.startswith(f"Document:\n{CONTEXTS[0]}\n\nClaim: The Sorrel Bridge crosses the Vell river.")
    assert "Is the claim supported by the document?" in prompt and "states no fact" in prompt
    assert prompt.endswith("Answer yes or no.")
    assert setting_name(EvaluationConfig(verdict_contexts="each", verdict_prompt="nli")) == \
        "graded, sentences, each passage, nli"


def test_a_cut_is_chosen_for_balanced_accuracy_and_scored_on_cases_it_was_not_chosen_on():
    supported = [0.95, 0.9, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.55, 0.5]
    unsupported = [0.9, 0.72, 0.65, 0.6, 0.4]
    verdicts = [(v, True) for v in supported] + [(v, False) for v in unsupported] + [(None, True)]
    # at 0.5 nearly everything reads supported: the rare class is mostly missed
    assert balanced_accuracy(verdicts, 0.5) == pytest.approx((10 / 11 + 1 / 5) / 2)
    cut = best_cut(verdicts)
    assert cut == pytest.approx(0.735) and balanced_accuracy(verdicts, cut) == pytest.approx((6 / 11 + 4 / 5) / 2)
    assert cross_validated(verdicts) == cross_validated(list(reversed(verdicts)))  # seeded folds, order-free
    assert cross_validated(verdicts) <= balanced_accuracy(verdicts, cut)  # never flatters itself
    assert cross_validated(verdicts[:12]) is None  # fewer unsupported cases than folds: not told
    assert auc([0.9, 0.5], [0.5, 0.1]) == pytest.approx((2 + 1.5) / 4)  # a tie counts half
    low, high = auc_interval(supported, unsupported)
    assert low < auc(supported, unsupported) < high and auc_interval(supported, unsupported) == (low, high)


#: the 1.5B as a judge's cache name holds it: its file's fingerprint is what identifies it (registry.NamedModel)
JUDGE_1_5B = "gguf:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf:d5cde8a7e219b5f2:fast"


def test_the_judge_s_cut_is_the_user_s_then_the_one_measured_on_people_s_labels_then_the_middle(monkeypatch):
    graded, unmeasured = EvaluationConfig(), EvaluationConfig(statements="judge")
    known = NAMED_MODELS["qwen2.5-1.5b"]
    monkeypatch.setitem(NAMED_MODELS, known.name, dataclasses.replace(known, as_judge={
        **known.as_judge, setting_name(graded): OnPeople(cut=0.81, auc=0.76, constructed=0.92, claims=304)}))
    assert judge_cut(graded, JUDGE_1_5B, setting_name(graded)) == Cut(0.81, "measured on 304 claims people labelled")
    assert judge_cut(EvaluationConfig(cut=0.7), JUDGE_1_5B, setting_name(graded)) == Cut(0.7, "evaluation.cut")
    # another model, or the same one under a setting nobody measured: the middle, said as such
    assert judge_cut(graded, "gguf:mine.gguf:9f:fast", setting_name(graded)).value == 0.5
    assert str(judge_cut(unmeasured, JUDGE_1_5B, setting_name(unmeasured))) == \
        "0.50 (the middle: no cut is known for this judge)"
    said = overstatement(JUDGE_1_5B, setting_name(graded))
    assert "AUC 0.76 where the check's kinds of case built from them gave 0.92" in said
    assert "reads about 0.16 above" in said
    assert overstatement("gguf:mine.gguf:9f:fast", setting_name(graded)) is None
    with pytest.raises(ValueError, match="cut is a setting of graded verdicts"):
        EvaluationConfig(verdicts="sampled", cut=0.7)


JUDGE_0_5B = "gguf:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf:037fa5a3c28c1932:fast"


def test_the_shipped_measurements_read_each_judge_at_its_cut_and_leave_a_judge_no_better_than_chance_at_the_middle(
        monkeypatch):
    """The development set's figures as shipped (docs/performance.md): the 1.5B's supported claims sit high and the
    0.5B's low, so each is read at its measured cut; a judge that ranked people's labels no better than chance
    is read at the middle, and says why."""
    graded = EvaluationConfig()
    assert judge_cut(graded, JUDGE_1_5B, setting_name(graded)).value == pytest.approx(0.89)
    assert judge_cut(graded, JUDGE_0_5B, setting_name(graded)) == Cut(0.37, "measured on 289 claims people labelled")
    chunks = EvaluationConfig(verdict_contexts="chunks")
    assert judge_cut(chunks, JUDGE_1_5B, setting_name(chunks)) == Cut(0.89, "measured on 1088 claims people labelled")
    numbered = ProjectConfig().evaluation  # the default where the generator judges
    assert setting_name(numbered) == "graded, sentences, numbered"
    assert judge_cut(numbered, JUDGE_1_5B, setting_name(numbered)) == Cut(0.88, "measured on 150 claims people "
                                                                               "labelled")
    assert judge_cut(numbered, JUDGE_0_5B, setting_name(numbered)).value == pytest.approx(0.45)
    small = NAMED_MODELS["qwen2.5-0.5b"]
    monkeypatch.setitem(NAMED_MODELS, small.name, dataclasses.replace(small, as_judge={
        setting_name(graded): OnPeople(cut=None, auc=0.42, constructed=0.63, claims=50)}))
    low = judge_cut(graded, JUDGE_0_5B, setting_name(graded))
    assert low.value == 0.5 and "no better than chance (AUC 0.42)" in low.source
    assert overstatement(JUDGE_1_5B, setting_name(graded)).startswith(
        "on 1057 real answers people labelled (AttributionBench), this judge (graded, sentences) scored AUC 0.73 "
        "where the check's kinds of case built from them gave 0.78: the check's AUC reads about 0.05 above")
    each = EvaluationConfig(verdict_contexts="each")  # measured on people, not on constructed cases: no gap claimed
    assert judge_cut(each, JUDGE_1_5B, setting_name(each)).value == pytest.approx(0.89)
    assert overstatement(JUDGE_1_5B, setting_name(each)) is None
    with pytest.raises(ValueError):
        EvaluationConfig(cut=1.0)


def test_every_rule_reading_a_graded_verdict_as_yes_or_no_uses_the_cut():
    supported = [0.95, 0.9, 0.85, 0.8, 0.75]
    unsupported = [0.7, 0.6, 0.4]
    scored = [CaseScore(Case("faithfulness", f"q{i}", "reference" if ok else "other_answer", "q?", "a.", ("c",), None),
                        v, None, 1.0, 1, 0) for i, (v, ok) in enumerate([(v, True) for v in supported] +
                                                                       [(v, False) for v in unsupported])]
    middle = JudgeCheck.of("judge", "demo", "unsupported", scored)
    at_cut = JudgeCheck.of("judge", "demo", "unsupported", scored, setting="graded, sentences",
                           cut=Cut(0.72, "evaluation.cut"))
    assert middle.metrics["faithfulness"].accuracy == pytest.approx(6 / 8)  # 0.7 and 0.6 read supported at 0.5
    assert at_cut.metrics["faithfulness"].accuracy == 1.0 and at_cut.metrics["faithfulness"].read_at == 0.72
    assert at_cut.metrics["faithfulness"].balanced_accuracy_at_cut == 1.0
    again = JudgeCheck.from_json(json.loads(json.dumps(at_cut.to_json())))  # a saved check keeps its cut
    assert again.cut == Cut(0.72, "evaluation.cut") and again.metrics == at_cut.metrics
    # compile's feedback on unsupported sentences reads the verdicts at the cut too
    for cut, verdicts in ((0.5, [1, 0]), (0.1, [1, 1])):
        graded = scorer(ScriptedLLM(), cut=cut)
        graded.score("faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
        assert [s.verdict for s in graded.judge.replies[-1].statements] == verdicts
    # the judge's agreement with people's labels (the report, the verdict, `tuner compare --labels`) too
    from tuner.analysis.corrections import Agreement
    from tuner.evaluation.judge.cut import cut_of
    from tuner.evaluation.records import EvalResult

    pairs = [(v, 1.0) for v in supported] + [(v, 0.0) for v in unsupported]
    assert Agreement.of(pairs).accuracy == pytest.approx(6 / 8)
    read = Agreement.of(pairs, read_at=0.72)
    assert read.accuracy == 1.0 and "on 100% at 0.72" in read.sentence()
    judged = EvalResult({}, {}, (), None, {}, models={"judge": JUDGE_1_5B})
    assert cut_of(EvaluationConfig(), judged) == pytest.approx(0.89)  # the shipped 1.5B's, as the report reads it
    assert cut_of(EvaluationConfig(cut=0.6), judged) == 0.6 and cut_of(EvaluationConfig(), None) == 0.5


REFERENCE = "The Sorrel Bridge crosses the Vell river. Gustave Eiffel designed its purple arches."
OTHER = "Berlin is the capital of Germany and its largest city."


def test_graded_recall_checks_the_reference_s_sentences_on_faithfulness_prefix():
    llm = ScriptedLLM()
    graded = scorer(llm, metrics=["faithfulness", "context_recall"])  # the defaults: graded, on sentences
    faithful = graded.score("faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
    recall = graded.score("context_recall", "Which bridge?", ANSWER, CONTEXTS, REFERENCE)
    prompts = [c["messages"][-1]["content"] for c in llm.calls]
    assert len(prompts) == 4 and all(c.get("reuse_prefix") for c in llm.calls)  # four verdicts, no other call
    # faithfulness' two verdicts and recall's two share everything up to the statement: one prefix per question
    assert {p.split("Statement: ")[0] for p in prompts} == {f"Context:\n{CONTEXTS[0]}\n\n"}
    held, invented = (float(ScriptedLLM().yes_probability([{"role": "user", "content": p}]).text)
                      for p in prompts[2:])
    assert held == 1.0 and invented < 0.5 and recall.value == pytest.approx((held + invented) / 2)
    assert faithful.value == pytest.approx((1 + 1 / 3) / 2)


def test_graded_precision_is_average_precision_over_each_passage_s_probability_in_rank_order():
    llm = ScriptedLLM()
    graded = scorer(llm, verdicts="graded", metrics=["context_precision"])
    first = graded.score("context_precision", "Which bridge?", ANSWER, CONTEXTS + [OTHER], REFERENCE).value
    last = graded.score("context_precision", "Which bridge?", ANSWER, [OTHER] + CONTEXTS, REFERENCE).value
    prompts = [c["messages"][-1]["content"] for c in llm.calls]
    assert all(c.get("reuse_prefix") for c in llm.calls) and len(prompts) == 4
    # each passage judged alone, after the question and reference its question's calls share
    assert all(p.startswith(f"Question: Which bridge?\nReference answer: {REFERENCE}\n\nPassage: ") for p in prompts)
    useful, useless = 1.0, float(ScriptedLLM().yes_probability([{"role": "user", "content": prompts[1]}]).text)
    assert useless < 0.5
    # RAGAS's average precision with probabilities for verdicts: the useful passage first scores higher
    assert first == pytest.approx((useful + useless * (useful + useless) / 2) / (useful + useless + 1e-10))
    assert last == pytest.approx((useless + useful * (useful + useless) / 2) / (useful + useless + 1e-10))
    assert first > last
    sampled = ScriptedLLM()
    scorer(sampled, verdicts="sampled", metrics=["context_precision", "context_recall"]).score(
        "context_recall", "Which bridge?", ANSWER, CONTEXTS, REFERENCE)
    assert [c["json_schema"]["title"] for c in sampled.calls] == ["ContextRecallOutput"]  # RAGAS's own, as before


def test_sentences_leave_citation_marks_out():
    assert answer_sentences("It opened in 1892 [1, 2]. It is red [3]!") == ["It opened in 1892.", "It is red!"]


def test_an_endpoint_s_logprobs_grade_and_one_without_them_falls_back_to_its_yes_or_no_and_says_so(tmp_path, caplog):
    from tuner.cache import SqliteStore

    with FakeEndpoint("scripted", delay=0) as server:
        endpoint = OpenAICompatibleLLM(server.url, "m")
        outcome = scorer(endpoint, verdicts="graded", statements="sentences").score(
            "faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
    asked = [json.loads(body) for body in server.bodies]
    assert all(a["max_tokens"] == 1 and a["logprobs"] and a["top_logprobs"] for a in asked)
    assert outcome.value == pytest.approx((1 + 1 / 3) / 2)  # a probability per sentence, not a 0/1 draw
    assert "log-probabilities" not in caplog.text

    with FakeEndpoint("ok", delay=0) as plain:  # answers "Ilsa Marrow." and no logprobs
        cached = CachedLLM(OpenAICompatibleLLM(plain.url, "plain"), SqliteStore(tmp_path / "c.sqlite"), CostMeter())
        with caplog.at_level(logging.WARNING):
            fallen = scorer(cached, verdicts="graded", statements="sentences").score(
                "faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
        again = cached.yes_probability([{"role": "user", "content": "Context:\nx\n\nStatement: y"}])
        assert again.from_text and cached.yes_probability(
            [{"role": "user", "content": "Context:\nx\n\nStatement: y"}]).from_text  # kept through the cache
    # its reply says neither yes nor no: no verdict, so the sample is unparsable, never an unsupported 0
    assert fallen.value is None and fallen.failure == "unparsable" and "neither yes nor no" in fallen.detail
    assert re.search(r"the judge openai-compatible:.*:plain gives no log-probabilities: graded verdicts are its "
                     r"sampled yes/no \(1 or 0\)", caplog.text)


def check(setting: str, auc: float, seconds: float) -> JudgeCheck:
    stats = MetricCheck("faithfulness", None, None, auc, 0.8, None, 0, seconds)
    return JudgeCheck("judge", "demo", "unsupported", {"faithfulness": stats}, (), setting=setting)


def test_the_check_chooses_the_best_auc_and_of_equals_the_fastest():
    today, graded, sentences = check("sampled", 0.74, 48.8), check("graded", 0.86, 9.0), check(
        "graded, sentences", 0.855, 3.0)
    chosen, why = choose([today, graded, sentences])
    assert chosen is sentences  # within 0.02 of the best AUC, and the fastest
    assert why.startswith("use faithfulness graded, sentences with judge: AUC 0.85 at 3.0 s a case")
    assert choose([today, graded, check("graded, sentences", 0.80, 1.0)])[0] is graded
    assert choose([today]) is None  # nothing to compare


@pytest.mark.slow
def test_judge_check_settings_with_the_real_0_5b_model_compare_and_choose(tmp_path, small_gguf):
    """Real: the 0.5B judge under each faithfulness setting on 2 demo questions' cases."""
    (tmp_path / "tuner.yaml").write_text(f"generator:\n  path: {small_gguf}\n  n_ctx: 4096\n")
    result = tuner("judge", "check", "--config", "tuner.yaml", "--n", "2", "--metrics", "faithfulness",
                   "--settings", "--agreement", "1", "--no-paraphrase", "--out", "check.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    checks = load_checks(tmp_path / "check.json")
    assert [c.setting for c in checks] == ["sampled", "graded", "graded, sentences", "graded, sentences, numbered",
                                           "graded, sentences, each passage", "graded, sentences, nli",
                                           "graded, sentences, each passage, nli", "graded, sentences, chunks"]
    for one in checks:
        faithfulness = one.metrics["faithfulness"]
        assert faithfulness.auc is not None and faithfulness.seconds_per_case > 0
        assert all(s.cold_seconds is not None for s in one.cases)
    sentences = checks[2].metrics["faithfulness"]
    assert sentences.flip_rate == 0  # no sampled step: a seed changes nothing
    assert re.search(r"^use faithfulness (sampled|graded)[a-z, ]* with gguf:", result.stdout, re.M), \
        result.stdout


@pytest.mark.slow
def test_graded_context_metrics_with_the_real_0_5b_model_tell_own_contexts_from_another_question_s(small_llm):
    """Real: the 0.5B judge grades recall and precision of a question's own passages above another topic's."""
    own = ["The Sorrel Bridge crosses the Vell river at Dunmore. It opened in 1892 and was designed by Ada Kell.",
           "Dunmore is a market town on the Vell, known for its stone bridge."]
    other = ["Berlin is the capital of Germany and its largest city.",
             "The Rhine flows from the Swiss Alps to the North Sea."]
    reference = "The Sorrel Bridge opened in 1892. Ada Kell designed it."
    graded = scorer(small_llm, verdicts="graded", metrics=["context_recall", "context_precision"])
    scores = {(metric, name): graded.score(metric, "When did the Sorrel Bridge open and who designed it?", "",
                                           contexts, reference).value
              for metric in ("context_recall", "context_precision") for name, contexts in (("own", own),
                                                                                           ("other", other))}
    assert all(0 <= value <= 1 for value in scores.values()), scores
    # ranked, not calibrated: the 0.5B gives about 0.47 and 0.49 to the own passages, 0.32 and 0.38 to the others
    assert scores["context_recall", "own"] > scores["context_recall", "other"] + 0.1, scores
    assert scores["context_precision", "own"] > scores["context_precision", "other"] + 0.1, scores


def test_a_judge_is_known_by_its_file_s_fingerprint_not_by_its_file_name():
    """The measured cut belongs to the model, not to a name: a renamed copy of the 1.5B's file is the 1.5B, and
    another file under the 1.5B's name is not (its scale is unknown: the middle)."""
    graded = EvaluationConfig()
    renamed = "gguf:judge.gguf:d5cde8a7e219b5f2:fast"
    assert judge_cut(graded, renamed, setting_name(graded)).value == pytest.approx(0.89)
    impostor = "gguf:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf:0000000000000000:fast"
    assert judge_cut(graded, impostor, setting_name(graded)).value == 0.5
    assert judge_cut(graded, "openai-compatible:http://127.0.0.1:8000/v1:qwen2.5-1.5b", setting_name(graded)).value \
        == 0.5


def test_the_registry_s_fingerprints_are_those_of_the_installed_files():
    """The fingerprint a judge is known by is its file's, as llama.cpp's cache name computes it."""
    from tuner.models.llms._llama_cpp import fingerprint
    from tuner.models.registry import locate

    checked = 0
    for model in NAMED_MODELS.values():
        located = locate(model)
        if located.ready and located.path is not None:
            assert fingerprint(located.path) == model.fingerprint, model.name
            checked += 1
    if not checked:
        pytest.skip("no named model is installed on this machine (tuner models install qwen2.5-0.5b)")


def test_the_cut_a_result_was_judged_at_is_read_from_its_record_not_recomputed():
    from tuner.cost import Cost
    from tuner.evaluation.judge.cut import cut_of
    from tuner.evaluation.records import EvalResult

    graded = EvaluationConfig()
    recorded = EvalResult({}, {}, (), Cost(), {}, models={"judge": JUDGE_1_5B}, cut=0.77)
    assert cut_of(graded, EvalResult.from_json(recorded.to_json())) == 0.77  # kept in the record
    assert cut_of(EvaluationConfig(cut=0.6), recorded) == 0.6  # the user's own cut still reads every result
    before = EvalResult({}, {}, (), Cost(), {}, models={"judge": JUDGE_1_5B})  # a record from before cuts were kept
    assert cut_of(graded, before) == pytest.approx(0.89)


def test_a_lexical_blend_reads_the_judge_s_score_with_the_answer_s_words_by_the_measured_coefficients(monkeypatch,
                                                                                                        tmp_path):
    """`evaluation.blend: lexical`: an answer's faithfulness is the chance people call it supported, from the judge's
    score and the shares of its words, numbers and names the passages hold, by the coefficients the development set
    measured for that judge and setting; a judge with none measured stops before the first trial in one line."""
    import tuner.evaluation.judge.cut as cut_module
    from tuner.metrics.graded import lexical_shares
    from tuner.models.registry import Blend, measured_blends

    blend = Blend(intercept=-2.0, judge=0.6, words=1.7, facts=0.4)
    assert blend.apply(0.5, 0.0, 0.0) == pytest.approx(1 / (1 + math.exp(2.0)))
    assert setting_name(EvaluationConfig(blend="lexical")) == "graded, sentences, lexical blend"
    measured = OnPeople(0.6, 0.75, None, 100, blend=blend)
    monkeypatch.setattr(cut_module, "as_judge", lambda judge, setting: measured if (
        setting == "graded, sentences, lexical blend") else None)
    question = "Which bridge crosses the Vell?"
    plain = scorer(ScriptedLLM()).score("faithfulness", question, ANSWER, CONTEXTS, None)
    blended = scorer(ScriptedLLM(), blend="lexical").score("faithfulness", question, ANSWER, CONTEXTS, None)
    words, facts = lexical_shares(CONTEXTS, ANSWER)
    assert 0 < words < 1  # the scripted answer invents a detail the passages lack
    assert blended.value == pytest.approx(blend.apply(plain.value, words, facts)) != pytest.approx(plain.value)
    assert "qwen2.5-1.5b (graded, sentences, lexical blend)" in measured_blends()  # shipped for the default judge
    monkeypatch.undo()
    with FakeEndpoint("scripted", delay=0) as endpoint:
        llm = {"backend": "openai-compatible", "base_url": endpoint.url, "model": "m"}
        (tmp_path / "blend.yaml").write_text(json.dumps({"generator": llm, "judge": llm,
                                                         "evaluation": {"blend": "lexical"}}))
        refused = tuner("optimize", "--config", "blend.yaml", "--study", "b", "--search-space", "quick", "--limit",
                        "3", "--target", "faithfulness", "--trials", "1", cwd=tmp_path)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    line = next(line for line in refused.stderr.splitlines() if "evaluation.blend" in line)
    assert line.startswith("error: evaluation.blend: lexical has no coefficients measured for the judge ")
    assert "measured: qwen2.5-1.5b (graded, sentences, lexical blend)" in line and "bench/combine.py" in line
    assert not list(tmp_path.glob("studies/b/trials/*.json"))  # refused before any trial ran
