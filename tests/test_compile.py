"""Prompt compilation: each optimizer runs under the contract, saves and reloads; the metric gives nothing for
saying nothing; the budget is a hard limit; a compile run again pays for no call twice; a real 0.5B compile."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import dspy
import pytest

from tests.fakes import ScriptedLLM
from tests.helpers import SAMPLED
from tuner.compile.metric import CompileMetric
from tuner.compile.optimizers import COMPILERS
from tuner.compile.run import CompileSettings, compile_program, examples
from tuner.compile.saved import SIDECAR_SCHEMA, Sidecar, read_sidecar, sidecar_path
from tuner.config import ProjectConfig
from tuner.errors import ConfigError, DataError, TunerError
from tuner.evaluation.rag_eval import RagRunner
from tuner.evaluation.records import Constraint
from tuner.models.llms import Completion
from tuner.models.provider import Models
from tuner.prompts.programs import AnswerFromContexts, RAGAnswer, load_program, program_id
from tuner.workspace import open_workspace


@pytest.fixture
def runner_with(tmp_path, fake_embedder):
    def make(llm) -> RagRunner:
        project = ProjectConfig(cache_dir=tmp_path / "cache", evaluation=SAMPLED)  # the fakes script RAGAS's NLI
        workspace = open_workspace(project, embedder=fake_embedder)
        return RagRunner(workspace, models=Models(llm, llm))

    return make


class Unsupported(ScriptedLLM):
    """Judges every statement unsupported; answers as told (`answer`)."""

    def __init__(self, answer: str = "The Sorrel Bridge [1]."):
        super().__init__()
        self.answer = answer

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        title = (json_schema or {}).get("title", "")
        if title == "NLIStatementOutput":
            self.calls.append({"messages": messages})
            return Completion(json.dumps({"statements": [{"statement": "The bridge is made of gold.",
                                                          "reason": "not stated", "verdict": 0}]}), 40, 8)
        completion = super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                   json_schema=json_schema)
        if json_schema is None:
            return Completion(completion.text.replace("The Sorrel Bridge [1].", self.answer), 50, 10)
        return completion


@pytest.mark.parametrize("optimizer", sorted(COMPILERS))
def test_each_optimizer_compiles_saves_and_reloads_under_the_contract(optimizer, tmp_path, runner_with):
    runner = runner_with(ScriptedLLM())
    questions = runner.workspace.dataset.questions[:5]
    settings = CompileSettings(optimizer, budget=120)
    compiled = compile_program(runner, runner.workspace.config.pipeline, questions[:3], questions[3:], settings,
                               tmp_path / "programs")
    sidecar = read_sidecar(compiled.path)
    assert compiled.path.is_file() and compiled.path.name == f"{optimizer}-{sidecar.program_id}.json"
    assert program_id(load_program(str(compiled.path))) == sidecar.program_id == program_id(compiled.program)
    assert sidecar.optimizer == optimizer and sidecar.generator == "scripted"
    assert sidecar.train_ids == tuple(q.id for q in questions[:3])
    assert sidecar.held_out_ids == tuple(q.id for q in questions[3:])
    assert 0 < sidecar.calls_paid <= 120 and sidecar.train_score == 1.0
    assert sidecar.pipeline["top_k"] == runner.workspace.config.pipeline.top_k
    assert (tmp_path / "programs" / "compile.log").stat().st_size > 0  # DSPy's chatter, not on the terminal


def test_program_id_follows_the_prompt_and_demos():
    plain = RAGAnswer(AnswerFromContexts)
    reworded = RAGAnswer(AnswerFromContexts.with_instructions("Answer from the contexts, citing [n]."))
    with_demo = RAGAnswer(AnswerFromContexts)
    with_demo.respond.demos = [dspy.Example(question="q", contexts="[1] c", answer="a [1]")]
    assert len({program_id(plain), program_id(reworded), program_id(with_demo)}) == 3
    assert program_id(plain) == program_id(RAGAnswer(AnswerFromContexts))


def test_the_metric_gives_nothing_for_saying_nothing(runner_with):
    runner = runner_with(ScriptedLLM())
    example = examples(runner, runner.workspace.dataset.questions[:1], runner.workspace.config.pipeline)[0]
    assert example.contexts and example.answerable
    metric = CompileMetric(runner.scorer, runner.meter)
    assert metric.score(example, "The Sorrel Bridge [1].").score == 1.0
    refusal = metric.score(example, "I cannot answer from the given context.")
    assert refusal.score == 0.0 and "declined" in refusal.feedback
    assert metric.score(example, "   ").score == 0.0
    garbled_judge = Models(ScriptedLLM(), ScriptedLLM("garbled", garbage=True))
    garbled = CompileMetric(RagRunner(runner.workspace, models=garbled_judge)
                            .scorer, runner.meter)
    unscored = garbled.score(example, "The Sorrel Bridge [1].")
    assert unscored.score == 0.0 and "could not score" in unscored.feedback


def test_a_guard_vetoes_and_gepa_hears_which_statements_lacked_support(runner_with):
    runner = runner_with(Unsupported())
    example = examples(runner, runner.workspace.dataset.questions[:1], runner.workspace.config.pipeline)[0]
    scored = CompileMetric(runner.scorer, runner.meter).with_feedback()(example, dspy.Prediction(
        answer="The Sorrel Bridge [1]."))
    assert scored.score == 0.0 and "The bridge is made of gold." in scored.feedback
    guarded = CompileMetric(runner_with(ScriptedLLM()).scorer, runner.meter,
                            guard=Constraint.parse("answer_relevancy>=1.01"))
    vetoed = guarded.score(example, "The Sorrel Bridge [1].")
    assert vetoed.score == 0.0 and "below the guard" in vetoed.feedback


def test_the_budget_is_a_hard_limit_and_a_rerun_pays_only_what_is_new(tmp_path, runner_with):
    llm = ScriptedLLM()
    runner = runner_with(llm)
    questions = runner.workspace.dataset.questions[:4]
    pipeline = runner.workspace.config.pipeline
    with pytest.raises(TunerError, match="budget of 3 LLM calls ran out .* nothing saved"):
        compile_program(runner, pipeline, questions[:3], questions[3:], CompileSettings("bootstrap", budget=3),
                        tmp_path / "p")
    assert len(llm.calls) == 3 and not list((tmp_path / "p").glob("*.json"))
    compiled = compile_program(runner, pipeline, questions[:3], questions[3:], CompileSettings("bootstrap", budget=50),
                               tmp_path / "p")
    assert compiled.sidecar.calls_paid == len(llm.calls) - 3  # the three paid before came from the cache
    assert compiled.sidecar.calls >= compiled.sidecar.calls_paid + 3
    again = compile_program(runner, pipeline, questions[:3], questions[3:], CompileSettings("bootstrap", budget=50),
                            tmp_path / "p")
    # all from the cache: nothing paid, and the sidecar still states what the compile costs
    assert again.sidecar.calls_paid == 0 and again.sidecar.calls == compiled.sidecar.calls


def test_bad_compile_settings_are_one_line(runner_with, tmp_path):
    with pytest.raises(ConfigError, match="choose bootstrap, mipro, gepa"):
        CompileSettings("adam")
    with pytest.raises(ConfigError, match="a compile tunes the answer"):
        CompileSettings(target="context_recall")
    runner = runner_with(ScriptedLLM())
    with pytest.raises(ConfigError, match="no training question"):
        compile_program(runner, runner.workspace.config.pipeline, [], [], CompileSettings(), tmp_path)


def test_tuner_compile_judges_the_program_on_held_out_questions(tmp_path, cli_with):
    invoke = cli_with(ScriptedLLM())
    result = invoke("compile", "--limit", "6", "--budget", "150", "--out", "programs")
    assert result.exit_code == 0, result.output
    [program] = [p for p in (tmp_path / "programs").glob("bootstrap-*.json") if not p.name.endswith(".meta.json")]
    held_out = read_sidecar(program).held_out
    assert set(held_out) == {"default", "compiled"} and held_out["compiled"].questions == 3
    assert held_out["compiled"].vs_reference["faithfulness"].verdict == "no difference"
    sidecar = read_sidecar(program)
    assert Sidecar.from_json(sidecar.to_json(), "again") == sidecar  # what is written is what is read
    assert "score the same on faithfulness" in sidecar.held_out_sentence
    assert "held-out" in result.output and "score the same on faithfulness" in result.output
    bad = invoke("compile", "--limit", "6", "--optimizer", "adam")
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    # errors name the option the user typed
    guard = invoke("compile", "--limit", "6", "--guard", "relevancy>0.5")
    assert guard.exit_code == 1 and str(guard.exception).startswith("--guard 'relevancy>0.5'")
    split = invoke("compile", "--limit", "2", "--split", "0.9")
    assert split.exit_code == 1 and str(split.exception).startswith("--split 0.9 of 2 question(s)")
    assert "--holdout" not in str(split.exception)


def test_a_sidecar_from_an_older_tuner_loads_and_one_from_a_newer_fails_in_one_line(tmp_path):
    program = tmp_path / "bootstrap-abc.json"
    sidecar_path(program).write_text(json.dumps({"program_id": "abc", "optimizer": "bootstrap", "calls_paid": 40,
                                                 "train_ids": ["q1"]}))  # before calls, schema and held_out
    old = read_sidecar(program)
    assert (old.calls, old.train_ids, old.held_out) == (40, ("q1",), None)
    assert old.held_out_sentence == "not judged on held-out questions"
    assert read_sidecar(tmp_path / "none.json") is None  # a program saved without one
    sidecar_path(program).write_text(json.dumps({"schema": SIDECAR_SCHEMA + 1, "program_id": "abc"}))
    with pytest.raises(DataError, match="newer tuner"):
        read_sidecar(program)


@pytest.mark.slow
def test_real_compile_killed_and_run_again_pays_no_call_twice(tmp_path, small_gguf):
    """A real 0.5B compile on 2 training questions (bootstrap, small budget) is killed with SIGKILL once calls are
    cached; run again, it pays exactly the calls that were not cached, and the program is judged on held-out."""
    env = {**os.environ, "TUNER_MODELS_DIR": str(small_gguf.parent)}
    (tmp_path / "tuner.yaml").write_text("generator: {model: qwen2.5-0.5b}\ncache_dir: cache\n")
    command = [sys.executable, "-m", "tuner", "compile", "--config", "tuner.yaml", "--limit", "3", "--train", "2",
               "--budget", "40", "--out", "programs"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cache = tmp_path / "cache" / "llm_calls.sqlite"
    deadline = time.time() + 900
    while cached_calls(cache) < 3:
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = cached_calls(cache)
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    [program] = [p for p in (tmp_path / "programs").glob("bootstrap-*.json") if not p.name.endswith(".meta.json")]
    sidecar = read_sidecar(program)
    compile_calls = sidecar.calls_paid
    held_out_calls = sum(row.llm_calls for row in sidecar.held_out.values())
    assert compile_calls + held_out_calls == cached_calls(cache) - before  # nothing paid twice
    assert sidecar.generator == sidecar.judge and "0.5b" in sidecar.generator
    assert sidecar.held_out["compiled"].questions == 1 and "held-out" in done.stdout


def cached_calls(path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path) as db:
            return db.execute("select count(*) from " + table_of(db)).fetchone()[0]
    except sqlite3.Error:
        return 0


def table_of(db) -> str:
    return db.execute("select name from sqlite_master where type='table'").fetchone()[0]


def test_a_new_study_offers_compiled_programs_and_a_resume_keeps_its_own(tmp_path, cli_with):
    invoke = cli_with(ScriptedLLM())
    assert invoke("compile", "--limit", "6", "--budget", "60").exit_code == 0  # into studies/programs/
    [program] = [p for p in (tmp_path / "studies" / "programs").glob("*.json") if not p.name.endswith(".meta.json")]
    study = ("optimize", "--study", "s", "--limit", "6", "--trials", "2", "--search-space", "quick",
             "--judge-check", "off", "--holdout", "0")
    first = invoke(*study)
    assert first.exit_code == 0, first.output
    meta = json.loads((tmp_path / "studies" / "s" / "study.json").read_text())
    assert meta["programs"] == [str(program)] and str(program) in meta["space"]["params"]["program"]["choices"]
    assert "compiled on 3 of this study's 6 search questions" in " ".join(first.output.split())
    report = (tmp_path / "reports" / "s" / "report.md").read_text()
    assert "## Compiled answer programs" in report and f"| {program} | bootstrap |" in report
    # a program compiled later is not slipped into the running study: its space (and Optuna's) stays as created
    assert invoke("compile", "--limit", "6", "--budget", "60", "--optimizer", "gepa", "--seed", "1").exit_code == 0
    resumed = invoke(*study[:-4], "--trials", "3", "--search-space", "quick")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((tmp_path / "studies" / "s" / "study.json").read_text())["programs"] == [str(program)]
