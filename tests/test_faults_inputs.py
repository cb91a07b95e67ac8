"""Bad input a user meets: unreadable data, bad options and spaces, programs of another signature, model faults,
prompts beyond the window, every trial failing. Each case asserts one line on stderr and no traceback."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import warnings
from types import SimpleNamespace

import pytest
import yaml

from tests.fakes import FakeEndpoint, ScriptedLLM
from tests.helpers import SAMPLED, RefusesHardQuestions, one_line_error, open_session, tuner
from tuner.errors import ConfigError
from tuner.models.provider import Models
from tuner.study.results import load_study, trial_states
from tuner.study.storage import study_folder


@pytest.mark.parametrize("params, said", [
    ({"top_k": {"type": "int", "low": 2, "high": 10, "step": 0.5}}, "params.top_k: an int parameter takes whole"),
    ({"reranker": {"type": "categorical", "choices": ["none", "colbert"]}}, "'colbert' is not a value reranker takes"),
    ({"alpha": {"type": "float", "low": 0, "high": 2}}, "2.0 is not a value alpha takes"),
    ({"top_k": {"type": "int", "low": 2, "high": 500}}, "500 is not a value top_k takes"),
    ({"alpha": {"type": "float", "low": 0, "high": 1, "step": 0.6}}, "step 0.6 does not land on high"),
    ({"reranker": {"type": "categorical", "choices": ["none", "embedding"]},
      "confidence_threshold": {"type": "float", "low": 0.3, "high": 0.8, "when": {"reranker": ["colbert"]}}},
     "reranker never takes colbert"),
    ({"top_k": {"type": "int", "low": True, "high": 5}}, "low: expected a number, got true"),
])
def test_a_search_space_is_checked_whole_before_any_trial(tmp_path, params, said):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"params": params}, sort_keys=False))
    one_line_error(tuner("spaces", "show", "bad.yaml", cwd=tmp_path), "bad.yaml", said)
    started = tuner("optimize", "--search-space", "bad.yaml", "--trials", "2", "--limit", "2", cwd=tmp_path)
    one_line_error(started, said)
    assert not (tmp_path / "studies" / "default").exists()  # refused before anything was created


def test_a_baseline_outside_the_space_is_named_once(tmp_path, fake_embedder):
    session = open_session(tmp_path, fake_embedder, {"params": {"top_k": {"type": "int", "low": 2, "high": 3}}},
                           limit=2)
    assert [n for n in session.notes() if "baseline's top_k=5 lies outside the search space" in n]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session.run(2)
    assert not [w for w in caught if "out of range" in str(w.message)]  # said once by tuner, not by Optuna
    assert not [n for n in session.notes() if "outside" in n]  # once trials ran, not on every resume
    assert session.study.trials[0].params == {"top_k": 5}


def beir(folder, corpus: bytes, qrels: str = "q1\td1\t1\n"):
    folder.mkdir()
    (folder / "corpus.jsonl").write_bytes(corpus)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "Who built the bridge?"}\n')
    (folder / "qrels.tsv").write_text(qrels)
    return folder


DOCS = b'{"_id": "d1", "text": "Ilsa Marrow built the bridge."}\n{"_id": "d2", "text": "The river is wide."}\n'


LATIN1 = DOCS + b'{"_id": "d3", "text": "caf\xe9"}\n'  # text saved in Latin-1, not UTF-8


E_ACUTE = LATIN1.index(b"\xe9")


@pytest.mark.parametrize("corpus, said", [
    (LATIN1, f"corpus.jsonl: not UTF-8 text (line 3, byte {E_ACUTE}: b'\\xe9')"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "corpus.jsonl: not UTF-8 text (line 1, byte 0"),  # an image
    (DOCS + b'{"_id": "d1", "text": "again"}\n', "set: document id 'd1' appears 2 times"),
])
def test_unreadable_or_ambiguous_data_is_one_line(tmp_path, corpus, said):
    folder = beir(tmp_path / "set", corpus)
    one_line_error(tuner("data", str(folder), cwd=tmp_path), said)


def test_blank_documents_and_unknown_gold_ids_are_noted(tmp_path):
    folder = beir(tmp_path / "set", DOCS + b'{"_id": "d3", "title": "no text"}\n', qrels="q1\td1\t1\nq1\td9\t1\n")
    result = tuner("data", str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "note: 1 document(s) have no text and are left out (e.g. 'd3')" in result.stderr
    assert "note: 1 gold document id(s) name no document of the corpus (e.g. 'd9')" in result.stderr
    assert "│ documents              │     2 │" in result.stdout


@pytest.mark.parametrize("args, said", [
    (("optimize", "--constraint", "faithfulness>=0.7.1"), "--constraint 'faithfulness>=0.7.1'"),
    (("eval", "--metrics", ""), "--metrics is empty"),
    (("eval", "--metrics", " , "), "--metrics is empty"),
    (("eval", "--set", "top_k=true"), "top_k"),
])
def test_bad_options_are_one_line(tmp_path, args, said):
    one_line_error(tuner(*args, cwd=tmp_path), said)
    assert not (tmp_path / "studies" / "default").exists()


@pytest.mark.parametrize("fault, said", [
    ("down", "cannot reach the LLM endpoint"),
    ("500", "answered HTTP 500"),
    ("html", "not a chat completion"),
    ("broken json", "not a chat completion"),
    ("unset key", "TUNER_TEST_UNSET_KEY"),
    ("truncated gguf", "cannot load as a GGUF model"),
])
def test_a_model_fault_on_resume_is_one_line_and_keeps_the_finished_trials(study_of_two, tmp_path, fault, said):
    """The night's second run meets a broken model: one line, non-zero exit, and the two finished trials stand."""
    with contextlib.ExitStack() as running:
        if fault == "truncated gguf":
            (tmp_path / "model.gguf").write_bytes(b"GGUF" + bytes(1000))
            model = {"model": "cut", "path": str(tmp_path / "model.gguf")}
        elif fault == "down":
            with FakeEndpoint() as gone:  # a port where nothing listens any more
                model = {"backend": "openai-compatible", "base_url": gone.url, "model": "m"}
        else:
            server = running.enter_context(FakeEndpoint(fault if fault in ("500", "html", "broken json") else "ok"))
            model = {"backend": "openai-compatible", "base_url": server.url, "model": "m"}
            if fault == "unset key":
                model["api_key_env"] = "TUNER_TEST_UNSET_KEY"
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
        result = tuner("optimize", "--config", "tuner.yaml", "--study", "s", "--trials", "3", "--limit", "2",
                       "--judge-check", "off", cwd=tmp_path)
    one_line_error(result, said, started=True)
    assert result.returncode == (2 if fault == "unset key" else 1)  # an unset variable is the user's to set
    states = trial_states(load_study(study_of_two).trials)
    assert states[:2] == ["complete", "complete"]  # the finished trials stand
    assert states[2:] in ([], ["interrupted"])  # the trial the model failed runs again on the next resume


class UnparsableJudge(ScriptedLLM):
    """Answers questions, but every judgement is prose where RAGAS wants JSON."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if json_schema is not None:
            from tuner.models.llms import Completion
            return Completion("I think the answer is mostly fine.", 10, 8)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


def test_a_study_whose_every_trial_failed_exits_non_zero_and_says_why(tmp_path, cli_with):
    from tuner.errors import TunerError

    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"evaluation": SAMPLED}))  # RAGAS's JSON verdicts
    result = cli_with(UnparsableJudge())("optimize", "--limit", "2", "--trials", "2", "--study", "bad", "--config",
                                         "tuner.yaml", "--judge-check", "off", "--search-space", "quick")
    assert isinstance(result.exception, TunerError), result.output
    assert str(result.exception) == (  # the cause named, the first question's words
        "no trial of study bad finished (2 failed; the last: no question could be scored on faithfulness "
        "(faithfulness: 2 unparsable, e.g. StatementGeneratorOutput unparsable after 3 tries: Invalid JSON: expected "
        "ident at line 1 column 2 in 'I think the answer is mostly fine.')): nothing to report as best")
    assert "Traceback" not in result.output and (tmp_path / "reports" / "bad" / "report.md").is_file()


@pytest.mark.parametrize("rule, counted", [("zero_if_answerable", True), ("zero", True), ("exclude", False)])
def test_refusing_hard_questions_does_not_win_faithfulness(tmp_path, fake_embedder, rule, counted):
    from tuner.config import EvaluationConfig, ProjectConfig
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    project = ProjectConfig(cache_dir=tmp_path, evaluation=EvaluationConfig(metrics=["faithfulness"], refusal=rule))
    llm = RefusesHardQuestions()
    runner = RagRunner(open_workspace(project, embedder=fake_embedder), models=Models(llm, llm))
    result = runner.evaluate(project.pipeline)
    refused = [q for q in result.questions if q.refusal]
    assert refused and len(refused) < len(result.questions)
    assert all(q.failures["faithfulness"].reason == "refusal" for q in refused)  # always recorded as such
    if counted:  # the demo names gold ids and top_k 5 finds them: each refusal counts, as 0
        assert all(q.scores["faithfulness"] == 0.0 for q in refused)
        assert result.scored("faithfulness") == len(result.questions)
    else:
        assert result.scored("faithfulness") == len(result.questions) - len(refused)
    assert result.metrics["faithfulness"] < 1.0 if counted else result.metrics["faithfulness"] == 1.0


def test_a_utf8_byte_order_mark_is_read(tmp_path):
    folder = beir(tmp_path / "set", b"\xef\xbb\xbf" + DOCS)
    (folder / "queries.jsonl").write_bytes(b'\xef\xbb\xbf{"_id": "q1", "text": "Who built the bridge?"}\n')
    (folder / "qrels.tsv").write_bytes(b"\xef\xbb\xbfq1\td1\t1\n")
    from tuner.data import load_dataset

    data = load_dataset(folder)
    assert [d.id for d in data.documents] == ["d1", "d2"] and data.questions[0].relevant_ids == {"d1"}
    rows = tmp_path / "rows.json"
    rows.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"question": "Who built it?", "answer": "Ilsa",
                                                    "contexts": ["Ilsa Marrow built the bridge."]}]).encode())
    from tuner.data._io import read_json

    assert read_json(rows)[0]["answer"] == "Ilsa"


def test_a_grid_too_large_to_run_is_refused_before_anything_starts(tmp_path):
    """The bundled retrieval space's grid has over 10^8 points: Optuna built it whole and the kernel killed tuner
    at 23.5 GB. Counted and refused in one line, on a new study and on a resume that switches to grid."""
    grid = ["optimize", "--target", "recall@5", "--search-space", "retrieval", "--trials", "2", "--limit", "3",
            "--judge-check", "off", "--study", "g"]
    refused = tuner(*grid, "--sampler", "grid", cwd=tmp_path)
    one_line_error(refused, "--sampler grid", "points", "more than a study could ever run", "tpe")
    assert not (tmp_path / "studies" / "g").exists()
    assert tuner(*grid, cwd=tmp_path).returncode == 0  # made with tpe, resumed with grid
    one_line_error(tuner(*grid[:5], "--trials", "3", "--study", "g", "--sampler", "grid", cwd=tmp_path),
                   "--sampler grid")
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({"params": {"top_k": {"type": "int", "low": 2, "high": 4}}}))
    ran = tuner("optimize", "--target", "recall@5", "--search-space", str(small), "--trials", "3", "--limit", "3",
                "--sampler", "grid", "--study", "small", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


def test_bad_index_knob_values_are_one_line_before_any_index_is_built(tmp_path):
    one_line_error(tuner("eval", "--retrieval-only", "--set", "chunker=paragraphs", cwd=tmp_path), "chunker",
                   "paragraphs")
    one_line_error(tuner("eval", "--retrieval-only", "--set", "chunk_size=12", cwd=tmp_path),
                   "chunk_overlap 30 is not below chunk_size 12")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"params": {
        "chunker": {"type": "categorical", "choices": ["words", "paragraphs"]}}}))
    one_line_error(tuner("spaces", "show", "bad.yaml", cwd=tmp_path), "params.chunker", "'paragraphs'")
    (tmp_path / "small.yaml").write_text(yaml.safe_dump({"params": {
        "chunk_size": {"type": "categorical", "choices": [20, 150]}}}))
    refused = tuner("optimize", "--target", "recall@5", "--search-space", "small.yaml", "--trials", "2",
                    "--limit", "2", cwd=tmp_path)
    one_line_error(refused, "small.yaml", "chunk_size=20", "chunk_overlap 30 is not below chunk_size 20")
    assert not (tmp_path / "studies" / "default").exists()
    (tmp_path / "tuner.yaml").write_text("chunking: {size: 200}\n")  # a baseline no choice of the space holds
    refused = tuner("optimize", "--target", "recall@5", "--search-space", "retrieval", "--trials", "2", "--limit", "2",
                    "--config", "tuner.yaml", cwd=tmp_path)
    one_line_error(refused, "the baseline's chunk_size=200 is not among the space's choices")
    assert not (tmp_path / "studies" / "default").exists()


def test_a_space_whose_draws_clash_is_refused_before_any_trial(tmp_path):
    (tmp_path / "clash.yaml").write_text(yaml.safe_dump({"params": {
        "min_docs": {"type": "int", "low": 1, "high": 5},
        "max_docs": {"type": "int", "low": 3, "high": 8}}}, sort_keys=False))
    refused = tuner("optimize", "--target", "recall@5", "--search-space", "clash.yaml", "--trials", "2",
                    "--limit", "2", cwd=tmp_path)
    one_line_error(refused, "clash.yaml", "min_docs=5, max_docs=3", "which no pipeline takes")
    assert not (tmp_path / "studies" / "default").exists()


def saved_program(path, fields=("Question:", "Contexts:", "Answer:"), predictor="respond"):
    """A DSPy program JSON as `program.save` writes it, with the given predictor name and field prefixes."""
    state = {"traces": [], "train": [], "demos": [], "lm": None, "signature": {
        "instructions": "Label the text.", "fields": [{"prefix": f, "description": "x"} for f in fields]}}
    path.write_text(json.dumps({predictor: state, "metadata": {"dependency_versions": {"dspy": "3.4.1"}}}))
    return path


@pytest.mark.parametrize("make, said", [
    (lambda p: saved_program(p, fields=("Text:", "Label:")), "predictor respond reads and writes Text: Label:"),
    (lambda p: saved_program(p, predictor="classify"), "predictors classify; an answer program has respond"),
    (lambda p: p.write_text('{"respond": {"signature": {"fie'), "not a saved answer program (JSONDecodeError"),
    (lambda p: None, "file not found"),
])
def test_a_program_of_another_signature_or_a_broken_file_is_refused_when_the_space_loads(tmp_path, make, said):
    from tuner.prompts.programs import load_program

    program = tmp_path / "other.json"
    make(program)
    with pytest.raises(ConfigError, match=re.escape(said)):  # used to answer with another signature, silently
        load_program(str(program))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"params": {"program": {
        "type": "categorical", "choices": ["default", str(program)]}}}))
    one_line_error(tuner("spaces", "show", "space.yaml", cwd=tmp_path), "params.program", said)
    refused = tuner("optimize", "--search-space", "space.yaml", "--trials", "2", "--limit", "2", cwd=tmp_path)
    one_line_error(refused, said)
    assert not (tmp_path / "studies" / "default").exists()  # before the baseline ran, not when a trial drew it


def test_an_unknown_program_name_is_refused_with_the_choices(tmp_path):
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"params": {"program": {
        "type": "categorical", "choices": ["default", "terse"]}}}))
    one_line_error(tuner("spaces", "show", "space.yaml", cwd=tmp_path), "'terse' is not a value program takes",
                   "default, strict or a saved program .json")


def essays(folder, count=4, words=2400):
    """A BEIR corpus of long essays (one gold essay per question), as the judge check met it."""
    folder.mkdir()
    topics = ["bridges", "lighthouses", "orchards", "harbours"]
    with open(folder / "corpus.jsonl", "w") as corpus:
        for i in range(count):
            filler = " ".join(f"The {topics[i]} of region {j} were described in volume {j}." for j in range(words // 9))
            first = f"The first {topics[i][:-1]} was built by Maren Holt{i} in 18{i}0."
            text = f"Essay {i} on {topics[i]}. {first} {filler}"
            corpus.write(json.dumps({"_id": f"e{i}", "title": f"On {topics[i]}", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w") as queries:
        for i in range(count):
            queries.write(json.dumps({"_id": f"q{i}", "text": f"Who built the first {topics[i][:-1]}?",
                                      "answer": f"Maren Holt{i} built it in 18{i}0."}) + "\n")
    (folder / "qrels.tsv").write_text("".join(f"q{i}\te{i}\t1\n" for i in range(count)))
    return folder


class SmallWindowJudge(ScriptedLLM):
    """A scripted judge with a context window: a prompt beyond it fails as llama.cpp's does."""

    context_window = 8192

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        from tuner.models.llms import PromptTooLong

        if self.count_tokens(" ".join(m["content"] for m in messages)) + max_tokens > self.context_window:
            raise PromptTooLong(f"Requested tokens exceed context window of {self.context_window}")
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


def test_the_judge_check_on_long_documents_judges_their_chunks_and_names_what_cannot_fit(tmp_path, fake_embedder):
    """Essays of 2,400 words: the cases used whole gold documents as contexts, and after 11 minutes a prompt
    exceeded the judge's window and nothing was kept. Cases now hold the gold documents' best chunks (what a
    study's contexts are), every case is measured against the window first, and one that still overflows is
    that case's failure."""
    from tuner.config import ChunkingConfig, EvaluationConfig, ProjectConfig
    from tuner.evaluation.judge.cases import make_cases
    from tuner.evaluation.judge.check import check_judge, tokens_needed
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    project = ProjectConfig(dataset={"path": essays(tmp_path / "essays")}, cache_dir=tmp_path / "cache",
                            chunking=ChunkingConfig(size=150, overlap=30),
                            evaluation=EvaluationConfig(metrics=["faithfulness", "context_recall"]))
    judge = SmallWindowJudge()
    runner = RagRunner(open_workspace(project, embedder=fake_embedder), models=Models(judge, judge))
    data = runner.workspace.dataset
    cases = make_cases(runner, data, data.questions, ["faithfulness", "context_recall"], 4,
                       kinds=("reference", "other_answer", "own_contexts", "other_contexts"))
    assert cases and all(len(c) < 1500 for case in cases for c in case.contexts)  # chunks, not 2,400-word essays
    own = next(c for c in cases if c.kind == "own_contexts" and c.question_id == "q1")
    assert "Maren Holt1" in own.contexts[0]  # the gold essay's chunk that answers the question
    check = check_judge(runner, cases)
    assert len(check.cases) == len(cases) and not check.too_long
    assert all(s.failure != "too_long" for s in check.cases)
    # a window too small for a case: named before any call, the rest judged and kept
    needs = sorted(tokens_needed(judge, project.judge_tokens, c) for c in cases)
    judge.context_window = window = needs[len(needs) // 2]
    over = [c.key for c in cases if tokens_needed(judge, project.judge_tokens, c) > window]
    calls_before = len(judge.calls)
    check = check_judge(runner, cases)
    assert over and check.too_long == tuple(over) and len(check.cases) == len(cases) - len(over)
    assert any("left out" in p and f"{window}-token" in p for p in check.problems)
    assert len(judge.calls) == calls_before  # the rest came from the cache: nothing failed, nothing re-paid


def test_a_prompt_beyond_the_window_is_that_sample_s_failure(tmp_path, fake_embedder):
    """A judge prompt that overflows (the up-front estimate missed it, or a study's contexts are long) scores that
    question "too_long" instead of interrupting the trial (which a resume would run, and fail, again)."""
    from tuner.config import EvaluationConfig
    from tuner.evaluation.ragas_judge import RagasScorer

    judge = SmallWindowJudge()
    scorer = RagasScorer(judge, fake_embedder, EvaluationConfig(**SAMPLED), 1024)
    long_context = "The bridge was painted grey in spring. " * 2000
    outcome = scorer.score("faithfulness", "Who built the bridge?", "The Sorrel Bridge [1].", [long_context], None)
    assert outcome.value is None and outcome.failure == "too_long"
    assert scorer.score("faithfulness", "Who built the bridge?", "The Sorrel Bridge [1].",
                        ["The Sorrel Bridge was built in 1850."], None).value is not None


@pytest.mark.slow
def test_the_real_model_says_prompt_too_long_and_counts_tokens(small_llm):
    from tuner.models.llms import PromptTooLong

    assert small_llm.context_window == 4096
    assert 5 <= small_llm.count_tokens("Who built the Sorrel Bridge in 1850?") <= 15
    with pytest.raises(PromptTooLong, match="raise generator/judge n_ctx"):
        small_llm.chat([{"role": "user", "content": "bridge " * 5000}], max_tokens=8)


def test_an_error_with_an_empty_message_is_said_by_its_type_not_an_index_error():
    from tuner.errors import described, first_line

    assert first_line(ValueError("")) == "ValueError" and described(ValueError("")) == "ValueError"
    assert first_line(ValueError("  \n")) == "ValueError" and first_line("") == "(no message)"
    assert described(OSError("disk full\nmore")) == "OSError: disk full"
    assert first_line("x" * 300) == "x" * 200


def test_the_json_object_of_a_reply_is_found_the_same_way_by_the_judge_and_the_question_writer():
    from pydantic import BaseModel

    from tuner.evaluation.ragas_judge import parse_reply as judge_reply
    from tuner.testset.gates import parse_reply as writer_reply

    class Reply(BaseModel):
        question: str

    for reply in ('{"question": "Who?"}', 'Sure! ```json\n{"question": "Who?"}\n```'):
        assert judge_reply(reply, Reply).question == "Who?"
        assert writer_reply(reply, ("question",)) == {"question": "Who?"}


def test_a_defect_inside_a_trial_is_one_line_with_its_traceback_kept_in_a_file(tmp_path, cli_with, monkeypatch,
                                                                                 capsys):
    """An exception no rule of tuner's expects (a bug of ours) ends the study in one line naming it and the file that
    keeps its traceback, exit 70; the trial is marked failed and the report written (was: Optuna's warning with the
    traceback, then Python's own)."""
    from tuner.cli import main
    from tuner.errors import INTERNAL_ERROR

    cli_with(ScriptedLLM())  # the fakes and the folder; run through main(), as the console script does

    def defect(objective, trial):
        raise ZeroDivisionError("a defect of tuner's own")

    monkeypatch.setattr("tuner.study.optimize.Objective.__call__", defect)
    monkeypatch.setattr(sys, "argv", ["tuner", "optimize", "--limit", "2", "--trials", "2", "--study", "d",
                                      "--judge-check", "off", "--search-space", "quick"])
    with pytest.raises(SystemExit) as ended:
        main()
    assert ended.value.code == INTERNAL_ERROR
    stderr = capsys.readouterr().err
    assert "warning" not in stderr.lower(), stderr
    line = one_line_error(SimpleNamespace(returncode=ended.value.code, stderr=stderr),
                          "internal error: ZeroDivisionError: a defect of tuner's own", started=True)
    kept = re.search(r"report it with (\S+)$", line).group(1)
    assert "Traceback (most recent call last)" in open(kept).read() and "def defect" not in stderr
    assert trial_states(load_study(study_folder(tmp_path / "studies", "d")).trials) == ["fail"]
    assert (tmp_path / "reports" / "d" / "report.md").is_file()

