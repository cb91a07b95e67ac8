"""The fourth battery of faults (issue 60): replies that arrive after a stop, log-probabilities that say nothing,
settings that change no token, damaged study records and the silent cases of the newer surfaces. Each case is
checked as a user meets it: what the command printed, what the study kept, what a local server was asked."""

from __future__ import annotations

import io
import json
import logging
import math
import re
import signal
import sys
import time
from dataclasses import replace

import numpy as np
import optuna
import pytest
import yaml

from tests.fakes import FakeEndpoint, ScriptedLLM
from tests.helpers import (
    ANSWER,
    CONTEXTS,
    IN_FLIGHT_STUDY,
    complete,
    endpoint_project,
    interruptible,
    one_line_error,
    scorer,
    signal_when,
    tuner,
)
from tuner.cli._interrupt import KEEP_REPLIES
from tuner.cli._live import StudyDisplay
from tuner.config import EvaluationConfig, ProjectConfig
from tuner.evaluation.judge.cases import quick_cases
from tuner.evaluation.judge.check import check_judge, choose
from tuner.evaluation.judge.cut import setting_name
from tuner.evaluation.rag_eval import held_back
from tuner.models.llms import LLM, LLMError
from tuner.models.llms._base import NO_LOGPROBS, NO_YES_NO, NOT_NUMBERS, Completion
from tuner.models.llms._openai import OpenAICompatibleLLM
from tuner.study.optimize import QuestionMoved, TrialStarted
from tuner.study.storage import study_folder

# --- the main job's log hears from every trial ----------------------------------------------------------------------

def test_a_log_hears_from_the_second_trial_as_from_the_first_and_times_each_from_its_own_start(monkeypatch):
    from tuner import ui

    monkeypatch.setenv("TUNER_LOG_EVERY", "0.1")
    log = io.StringIO()
    monkeypatch.setattr(ui.err_console, "_file", log)
    study = optuna.create_study()
    with StudyDisplay(study, total_trials=2, questions=3, targets=["faithfulness"]) as display:
        display(TrialStarted(0, {"top_k": 3}))
        for index in range(3):
            display(QuestionMoved(index, "done"))
        time.sleep(2.0)  # trial 1 starts two seconds after the study
        display(TrialStarted(1, {"top_k": 5}))
        display(QuestionMoved(0, "done"))
        time.sleep(0.35)
    lines = log.getvalue().splitlines()
    assert any(re.fullmatch(r"trial 1: top_k=5: 1/3 .*so far", line) for line in lines), lines
    # the last trial's closing line counts its own seconds, not the study's
    closing = [line for line in lines if line.startswith("trial 1: top_k=5: 1/3 done in")]
    assert len(closing) == 1 and re.fullmatch(r".* done in [01] s", closing[0]), lines


# --- damaged study records --------------------------------------------------------------------------------------

def test_a_study_json_with_no_settings_is_rebuilt_from_the_journal_or_named_in_one_line(study_of_two, tmp_path):
    before = study_of_two.read_meta()
    where = ("--study", "s", "--studies-dir", str(study_of_two.root.parent))
    study_of_two.meta.write_text('{"schema": 1}')  # was an IndexError deep in the resume
    shown = tuner("trials", *where, cwd=tmp_path)
    assert shown.returncode == 0 and "study.json was unreadable" in shown.stderr, shown.stderr
    assert study_of_two.read_meta() == before and complete(study_of_two) == 2
    study_of_two.meta.write_text('{"schema": 1}')
    study_of_two.journal.rename(study_of_two.root / "journal.kept")
    one_line_error(tuner("trials", *where, cwd=tmp_path), "study.json: not a tuner study record",
                   "it names no target")


def test_a_schema_that_is_no_number_is_damage_not_a_newer_tuner(study_of_two, tmp_path):
    where = ("--study", "s", "--studies-dir", str(study_of_two.root.parent))
    study_of_two.journal.rename(study_of_two.root / "journal.kept")
    study_of_two.meta.write_text('{"schema": "abc", "targets": ["faithfulness"]}')
    said = one_line_error(tuner("trials", *where, cwd=tmp_path), "study.json: damaged", "'abc'")
    assert "newer" not in said
    study_of_two.meta.write_text('{"schema": 99, "targets": ["faithfulness"]}')
    one_line_error(tuner("trials", *where, cwd=tmp_path), "written by a newer tuner (schema 99")


def test_a_folder_in_place_of_study_json_is_named_in_one_line_and_leaves_no_partial_file(study_of_two, tmp_path):
    study_of_two.meta.unlink()
    study_of_two.meta.mkdir()
    said = one_line_error(tuner("optimize", "--study", "s", "--studies-dir", str(study_of_two.root.parent),
                                "--trials", "3", cwd=tmp_path), "study.json")
    assert "partial" not in said, said
    assert not list(study_of_two.root.glob("*.partial"))
    study_of_two.meta.rmdir()  # moved away, as the line says: the study is whole
    assert complete(study_of_two) == 2


# --- replies that arrive after a stop are kept ------------------------------------------------------------------

@pytest.mark.parametrize("command, number", [("optimize", signal.SIGINT), ("optimize", signal.SIGTERM),
                                              ("eval", signal.SIGINT), ("eval", signal.SIGTERM)])
def test_a_reply_that_arrives_while_tuner_stops_is_cached_and_not_paid_again(tmp_path, command, number):
    """Eight questions in flight at an endpoint that answers 0.5 s after each request; the stop comes as the eighth
    request arrives, so the replies reach tuner while it stops. Each answered before tuner left is cached: the
    command run again asks the server for none of them (counted by request body)."""
    limit = ("--limit", "10")  # eight in flight at the stop, and a few more for the run again
    args = (*IN_FLIGHT_STUDY, *limit) if command == "optimize" else (
        "eval", "--config", "tuner.yaml", *limit, "--metrics", "faithfulness")
    with FakeEndpoint("scripted", delay=0.5) as server:
        endpoint_project(tmp_path, server.url, 8)
        process = interruptible([sys.executable, "-m", "tuner", *args], tmp_path)
        stderr, took = signal_when(process, lambda: len(server.bodies) >= 8, number)
        left = time.monotonic()
        assert process.returncode == 128 + number and "Traceback" not in stderr, stderr
        # tuner waits for the calls in flight until KEEP_REPLIES after the signal: every reply sent before it left
        # was read, save one sent in the last instants before that deadline (a tenth of a second is its to be read)
        waited_until = left - took + KEEP_REPLIES - 0.1
        answered = {body for body, at in server.answered if at < min(left, waited_until)}
        asked = len(server.bodies)
        again = tuner(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(answered) >= 8, (len(answered), took)  # the replies did come while tuner stopped
    assert not answered & set(server.bodies[asked:])  # and none was asked for again
    assert took < 3, took


# --- log-probabilities that cannot give P(yes) ----------------------------------------------------------------------

class LogprobsSay(ScriptedLLM):
    """Answers every yes/no question with `text` and the top log-probabilities `top`; the rest as ScriptedLLM."""

    def __init__(self, text: str, top: dict):
        super().__init__(f"says-{text}")
        self.text, self.top = text, top

    def yes_probability(self, messages, reuse_prefix=False):
        return LLM.yes_probability(self, messages, reuse_prefix)

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if max_tokens == 1:
            return Completion(self.text, 30, 1, self.top)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


@pytest.mark.parametrize("text, top, why, value", [
    ("The", {"The": -0.1, "It": -2.5}, NO_YES_NO, None),  # neither among the top tokens, nor said: no verdict
    ("yes", {"The": -0.1, "It": -2.5}, NO_YES_NO, 1.0),  # not among the top ones, but said: its sampled yes
    ("yes", {"yes": "abc", "no": -1.0}, NOT_NUMBERS, 1.0),  # was a TypeError, cause only in --out
    ("no", {"yes": float("nan"), "no": -0.2}, NOT_NUMBERS, 0.0),  # was NaN: "no question could be scored"
    ("no", {}, NO_LOGPROBS, 0.0),
])
def test_log_probabilities_that_cannot_give_p_yes_are_named_for_what_they_are(text, top, why, value, caplog):
    judge = LogprobsSay(text, top)
    reply = judge.yes_probability([{"role": "user", "content": "Context:\nx\n\nStatement: y"}])
    assert reply.from_text == why
    assert math.isnan(float(reply.text)) if value is None else float(reply.text) == value
    with caplog.at_level(logging.WARNING):
        outcome = scorer(judge, verdicts="graded", statements="sentences").score(
            "faithfulness", "Which bridge?", ANSWER, CONTEXTS, None)
    assert f"the judge says-{text} {why}: graded verdicts are its sampled yes/no" in caplog.text
    if value is None:  # a reply that says neither is no verdict: unparsable, never "unsupported" (0)
        assert outcome.value is None and outcome.failure == "unparsable" and "neither yes nor no" in outcome.detail
    else:
        assert outcome.value == value and outcome.failure is None


def test_eval_names_why_a_metric_went_unscored_and_the_report_names_verdicts_read_off_text(cli_with, tmp_path):
    invoke = cli_with(LogprobsSay("The", {"The": -0.1}))
    shown = invoke("eval", "--limit", "2", "--metrics", "faithfulness")
    assert shown.exit_code == 0, shown.output
    assert re.search(r"faithfulness unscored: 2 unparsable, e\.g\. the judge's yes/no verdict said neither yes nor "
                     r"no", shown.output), shown.output
    invoke = cli_with(LogprobsSay("no", {}))
    ran = invoke("optimize", "--limit", "2", "--trials", "1", "--judge-check", "off", "--search-space", "quick",
                 "--own-cache", "--study", "plain")
    assert ran.exit_code == 0, ran.output
    report = (tmp_path / "reports" / "plain" / "report.md").read_text()
    assert "its verdicts were sampled yes/no (1 or 0): the judge gives no log-probabilities" in report


def test_a_study_that_scores_no_question_names_the_cause(cli_with, tmp_path):
    invoke = cli_with(LogprobsSay("The", {"The": -0.1}))
    ran = invoke("optimize", "--limit", "2", "--trials", "1", "--judge-check", "off", "--search-space", "quick",
                 "--own-cache", "--study", "neither")
    assert "no question could be scored on faithfulness (faithfulness: 2 unparsable, e.g. the judge's yes/no " \
           "verdict said neither yes nor no)" in str(ran.exception), ran.output  # the line main() prints


def test_a_judge_check_of_graded_verdicts_without_log_probabilities_says_they_were_sampled_yes_no(runner_factory):
    runner, _ = runner_factory(LogprobsSay("no", {}), limit=2)
    cases = quick_cases(runner, runner.workspace.dataset.questions, ["faithfulness"])
    checked = check_judge(runner, cases)
    assert checked.setting == "graded, sentences, numbered (as sampled yes/no: the judge gives no log-probabilities)"
    sampled = replace(checked, setting="sampled")
    chosen = choose([checked, sampled])
    assert chosen is not None and "(as sampled yes/no: the judge gives no log-probabilities)" in chosen[1]
    assert setting_name(EvaluationConfig(verdicts="sampled"), NO_LOGPROBS) == "sampled"


# --- endpoints: waits beyond the cap, concurrency held back --------------------------------------------------------

def test_a_retry_after_beyond_the_cap_is_said_as_such_after_one_request():
    with FakeEndpoint("429 once", delay=100000) as server:
        llm = OpenAICompatibleLLM(server.url, "m")
        with pytest.raises(LLMError) as raised:
            llm.chat([{"role": "user", "content": "Who wrote it?"}])
    assert len(server.bodies) == 1
    assert "answered HTTP 429 and asked for a wait of 100000 s, beyond the 120 s tuner waits (1 try)" in \
        str(raised.value) and "4 tries" not in str(raised.value)


def test_an_endpoint_s_concurrency_held_back_by_an_in_process_judge_is_said():
    endpoint = {"backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m", "concurrency": 8}
    project = ProjectConfig.model_validate({"generator": endpoint, "judge": {"model": "qwen2.5-1.5b"}})
    said = held_back(project)
    assert said == ("the generator takes 8 calls at once, but the judge (qwen2.5-1.5b) answers in process, one call "
                    "at a time: questions are evaluated 1 at a time (give the judge an endpoint with concurrency 8 "
                    "to go faster)")
    assert held_back(ProjectConfig.model_validate({"generator": endpoint})) is None  # the judge is the generator
    assert held_back(ProjectConfig()) is None


# --- resumes, models, anchors -----------------------------------------------------------------------------------

def test_a_resume_with_config_keeps_the_study_s_limit(tmp_path):
    (tmp_path / "tuner.yaml").write_text("{}\n")
    first = tuner("optimize", "--limit", "3", "--trials", "1", "--judge-check", "off", "--search-space", "quick",
                  "--target", "ndcg@10", "--own-cache", "--study", "s", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    resumed = tuner("optimize", "--config", "tuner.yaml", "--trials", "2", "--study", "s", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr  # was: "used --limit 3, not None ... (or leave them out)"
    assert complete(study_folder(tmp_path / "studies", "s")) == 2


def test_a_relative_gguf_that_is_missing_names_where_it_was_looked_for(tmp_path, monkeypatch):
    from tuner.config import LlamaCppConfig
    from tuner.errors import ConfigError
    from tuner.models.check import gguf_of

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        gguf_of(LlamaCppConfig(model="models/small.gguf"), "generator")
    assert str(raised.value) == (f"generator models/small.gguf: GGUF file not found (looked for "
                                 f"{tmp_path / 'models' / 'small.gguf'})")


def test_a_draft_model_is_checked_as_the_model_is_and_counted_in_its_memory(tmp_path, monkeypatch, small_gguf):
    from tuner.config import LlamaCppConfig
    from tuner.errors import ConfigError
    from tuner.models.check import gguf_of

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        gguf_of(LlamaCppConfig(model=str(small_gguf), speculative="qwen-tiny"), "generator")
    assert str(raised.value).startswith("generator's draft model (speculative:) 'qwen-tiny': not a named local "
                                        "model (qwen2.5-0.5b, ")
    with pytest.raises(ConfigError) as raised:
        gguf_of(LlamaCppConfig(model=str(small_gguf), speculative="drafts/small.gguf"), "generator")
    assert str(raised.value) == (f"generator's draft model (speculative:) drafts/small.gguf: GGUF file not found "
                                 f"(looked for {tmp_path / 'drafts' / 'small.gguf'})")
    with small_gguf.open("rb") as whole, (tmp_path / "draft.gguf").open("wb") as head:
        head.write(whole.read(8 << 20))  # its header and a little: a GGUF file smaller than the model, as a draft is
    alone = gguf_of(LlamaCppConfig(model=str(small_gguf)), "generator")
    drafted = gguf_of(LlamaCppConfig(model=str(small_gguf), speculative=str(tmp_path / "draft.gguf")), "generator")
    assert drafted[0] == alone[0] and drafted[1] > alone[1] + 2 * (8 << 20)


def anchor_files(folder, questions: list[str]):
    from tuner.data import Document

    documents = [Document(id=f"d{i}", title="", text=text) for i, text in enumerate((
        "The harbour of Nordvik opened in 1871 and ships timber.", "The lighthouse of Nordvik is painted red.",
        "Nordvik's school was built from harbour timber in 1880."))]
    rows = [{"question": q, "documents": [f"d{i % 3}"]} for i, q in enumerate(questions)]
    path = folder / "anchors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, documents


def test_anchor_questions_in_another_language_than_the_corpus_are_noted(tmp_path, caplog):
    from tuner.testset.anchors import read_anchors

    english = ["When did the harbour of Nordvik open?", "What colour is the lighthouse of Nordvik?",
               "What was the school of Nordvik built from?", "What does the harbour of Nordvik ship?",
               "When was the Nordvik school built?"]
    german = ["Wann wurde der Hafen eröffnet?", "Welche Farbe hat der Leuchtturm?", "Woraus wurde die Schule gebaut?",
              "Was verschifft der Hafen?", "Wann wurde die Schule gebaut?"]
    path, documents = anchor_files(tmp_path, english)
    with caplog.at_level(logging.WARNING):
        read_anchors(path, documents)
    assert "another language" not in caplog.text and "language" not in caplog.text
    path, documents = anchor_files(tmp_path, german)
    with caplog.at_level(logging.WARNING):
        assert len(read_anchors(path, documents)) == 5  # noted, not refused: names and numbers may be all they share
    assert "the anchor questions share few words with the documents they name" in caplog.text
    assert "are they in the corpus's language?" in caplog.text


def test_one_generated_question_is_too_few_for_tau_and_no_interval_is_printed():
    from tuner.data import Document, Question
    from tuner.testset.anchors import check_anchors

    anchors = [Question(id=f"a{i}", text=f"harbour question {i}", relevant_ids=frozenset({"d0"})) for i in range(5)]
    generated = [Question(id="g0", text="harbour question", relevant_ids=frozenset({"d0"}))]
    scores = iter(np.linspace(0.1, 0.9, 12))

    def score(config, asked):
        return np.full(len(asked), next(scores))

    documents = [Document(id="d0", title="", text="A harbour question.")]
    checked = check_anchors(score, {"a": 1, "b": 2, "c": 3}, generated, anchors, documents)
    assert checked.tau is None
    said = checked.sentence()
    assert said == ("The 5 anchor questions could not be compared with the generated ones: only 1 generated "
                    "question(s) with gold documents, and τ needs 5.")
    assert "study" not in said


def test_a_report_written_on_a_stop_in_trial_0_counts_what_it_paid_and_its_questions(tmp_path):
    with FakeEndpoint("scripted", delay=0.3) as server:
        endpoint_project(tmp_path, server.url, 1)
        process = interruptible([sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--limit", "6",
                                 "--holdout", "0.34", "--trials", "2", "--judge-check", "off", "--search-space",
                                 "quick", "--study", "s"], tmp_path)
        # one call at a time: the fourth request means the third reply was read and counted
        stderr, _ = signal_when(process, lambda: len(server.bodies) >= 4, signal.SIGTERM)
    assert process.returncode == 143, stderr
    report = (tmp_path / "reports" / "s" / "report.md").read_text()
    paid = int(re.search(r"LLM calls \| (\d+) paid", report).group(1))
    assert paid >= 3, report  # was "0 paid": the interrupted trial's calls count
    assert "the bundled demo (4 search questions, 2 held out)" in report  # was "? search questions"
    assert re.search(r"; \d+ s inside trials", report) and "; 0 s inside trials" not in report, report
    # graded verdicts on the answer's sentences make no sampled call: no advice to measure their noise
    assert "--noise 3" not in report and "None to measure: graded verdicts" in report


def test_a_server_that_takes_the_connection_and_answers_nothing_is_told_before_the_first_question(tmp_path):
    """Was: each call waited the 120-s timeout four times over, 8 minutes with nothing but progress lines."""
    import socket

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # the kernel completes connections; nothing ever reads or answers
    url = f"http://127.0.0.1:{hung.getsockname()[1]}/v1"
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {
        "backend": "openai-compatible", "base_url": url, "model": "m"}}))
    began = time.monotonic()
    result = tuner("eval", "--config", "tuner.yaml", "--limit", "2", "--metrics", "faithfulness", cwd=tmp_path)
    took = time.monotonic() - began
    hung.close()
    one_line_error(result, f"the LLM endpoint {url} took the connection but answered nothing within 10 s "
                           f"(GET /models): is the server hung? (the generator)", started=True)
    assert took < 40, took


def test_an_estimate_shows_the_index_build_before_the_questions_it_measures(tmp_path, fake_embedder):
    """Was: 12 minutes of "measuring the baseline on 2 search questions (cached)" while 4,290 chunks were embedded."""
    from tuner.models.provider import Models
    from tuner.study.estimate import estimate_study
    from tuner.study.optimize import StudySettings

    steps: list[tuple[str, int, int]] = []
    llm = ScriptedLLM()
    told = estimate_study(ProjectConfig(cache_dir=tmp_path / "cache"), StudySettings(["faithfulness"]), 4, 0.0,
                          limit=4, models=Models(llm, llm), embedder=fake_embedder,
                          on_progress=lambda step, done, total: steps.append((step, done, total)))
    names = list(dict.fromkeys(step for step, _, _ in steps))
    assert names[0].startswith("embedding") and names[-1] == "measuring the baseline on 4 search question(s)"
    assert steps[-1] == ("measuring the baseline on 4 search question(s)", 4, 4) and told.sampled == 4
