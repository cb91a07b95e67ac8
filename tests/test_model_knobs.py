"""Models as knobs: the generator, the embedder and the reranker's model searched like any knob, the judge fixed,
the models settled first in rounds (Greedy-M), in-process models unloaded to make room — with scripted models
for the wiring, and for real with the 0.5B and 1.5B GGUF models and a second (tiny, random) embedder."""

from __future__ import annotations

import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.fakes import ScriptedLLM
from tests.helpers import one_line_error, tuner
from tuner.agent import run_rounds
from tuner.config import PipelineConfig, ProjectConfig
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.llms._memory import BUDGET_ENV, NotGGUF, footprint, parse_size, read_header
from tuner.models.provider import Models
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec
from tuner.study.storage import study_folder
from tuner.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[1]


def endpoint(model: str) -> dict:
    """An endpoint model as the project declares it (never called: the tests hand in scripted models)."""
    return {"backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "model": model}


def project_of(tmp_path, judge: str = "judge") -> ProjectConfig:
    """A project answering with endpoint model `big` (another, `small`, declared for the generator knob)."""
    return ProjectConfig.model_validate({"cache_dir": str(tmp_path / "cache"), "generator": endpoint("big"),
                                         "judge": endpoint(judge), "generators": {"small": endpoint("small")}})


GENERATORS = {"type": "categorical", "choices": ["big", "small"]}


def open_study(tmp_path, fake_embedder, space: dict, models: Models, judge: str = "judge") -> Session:
    space_file = tmp_path / "space.yaml"
    space_file.write_text(yaml.safe_dump(space, sort_keys=False))
    session = Session.open(StudySpec("m", StudySettings(["faithfulness"], sampler="grid"), space_file,
                                     project_of(tmp_path, judge), limit=2, studies_dir=tmp_path / "studies"))
    session.runner(models=models, embedder=fake_embedder)
    return session


def test_a_trial_answers_with_its_generator_while_the_judge_stays_the_projects(tmp_path, fake_embedder):
    big, small, judge = ScriptedLLM("big"), ScriptedLLM("small"), ScriptedLLM("judge")
    space = {"params": {"generator": GENERATORS, "top_k": {"type": "int", "low": 4, "high": 5}}}
    session = open_study(tmp_path, fake_embedder, space, Models(big, judge, {"small": small}))
    session.run(4)

    trials = [t for t in read_study(session.folder).trials if t.result is not None]
    assert {t.pipeline["generator"] for t in trials} == {"big", "small"}
    for trial in trials:
        assert trial.result.models["generator"] == trial.pipeline["generator"]
        assert trial.result.models["judge"] == "judge"
    answers = [c for llm in (big, small) for c in llm.calls]
    assert answers and all(c["json_schema"] is None for c in answers)  # the generators only answered
    assert judge.calls and all(c["json_schema"] is not None or "reuse_prefix" in c for c in judge.calls)


def test_the_report_says_when_the_judge_judged_its_own_answers_and_names_the_cheaper_model(tmp_path, fake_embedder):
    big, small = ScriptedLLM("big"), ScriptedLLM("small")
    session = open_study(tmp_path, fake_embedder, {"params": {"generator": GENERATORS}},
                         Models(big, big, {"small": small}), judge="big")
    assert any("the judge is also the generator choice big" in note for note in session.notes())
    session.run(2)
    from tuner.analysis.verdict import give_verdict
    from tuner.reports import write_report

    report = write_report(give_verdict(read_study(session.folder), session.runner()), tmp_path / "report")
    text = report.path.read_text()
    judge_row = next(line for line in text.splitlines() if line.startswith("| judge |"))
    assert "also the generator of trial 0" in judge_row and "self-preference" in judge_row
    assert "its own may score higher" in judge_row  # the other generator's answers sit beside its own


def test_a_space_varying_the_judge_or_naming_models_that_cannot_run_is_refused_in_one_line(tmp_path, small_gguf):
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + struct.pack("<I", 3))  # the magic, then the header cut short
    (tmp_path / "notes.gguf").write_text("not a model")
    cases = {
        "judge": ({"judge": {"type": "categorical", "choices": ["qwen2.5-0.5b"]}}, ["judge is fixed", "judge:"]),
        "unknown": ({"generator": {"type": "categorical", "choices": ["qwen2.5-0.5b", "gpt-4o-mini"]}},
                    ["gpt-4o-mini", "not a named local model", "generators:"]),
        "not-gguf": ({"generator": {"type": "categorical", "choices": ["notes.gguf"]}},
                     ["notes.gguf", "not a GGUF file"]),
        "cut-short": ({"generator": {"type": "categorical", "choices": ["broken.gguf"]}}, ["cut short"]),
        "embedder": ({"embedder": {"type": "categorical", "choices": ["all-MiniLM-L6-v2", "org/no-such-model"]}},
                     ["org/no-such-model", "not in the Hugging Face cache"]),
        "folder": ({"reranker_model": {"type": "categorical", "choices": [str(tmp_path)]}},
                   ["reranker model", "not a model folder"]),
    }
    for name, (params, words) in cases.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump({"params": params}))
        one_line_error(tuner("spaces", "show", f"{name}.yaml", cwd=tmp_path), *words)
    # a study is refused before its first trial, and leaves nothing behind
    refused = tuner("optimize", "--search-space", "unknown.yaml", "--trials", "1", "--limit", "2", cwd=tmp_path)
    one_line_error(refused, "gpt-4o-mini", started=True)
    assert not (tmp_path / "studies" / "default").exists()


def test_generators_that_cannot_fit_beside_the_judge_are_refused_with_the_figure(tmp_path, small_gguf, monkeypatch):
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"generator": {"model": "qwen2.5-0.5b"}}))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(
        {"params": {"generator": {"type": "categorical", "choices": ["qwen2.5-0.5b"]}}}))
    need = footprint(small_gguf, 4096, "fast")
    monkeypatch.setenv(BUDGET_ENV, str(need - 1))
    line = one_line_error(tuner("spaces", "show", "space.yaml", "--config", "tuner.yaml", cwd=tmp_path),
                          "needs about", "GiB", f"{BUDGET_ENV}={need - 1} allows")
    assert f"{need / (1 << 30):.1f} GiB" in line
    assert "this machine" not in line  # the budget set holds the models to it, not the machine
    monkeypatch.setenv(BUDGET_ENV, str(need * 2))  # the generator is the judge: it is loaded once
    assert tuner("spaces", "show", "space.yaml", "--config", "tuner.yaml", cwd=tmp_path).returncode == 0


def test_a_gguf_header_is_read_without_loading_the_weights(tmp_path, small_gguf):
    header = read_header(small_gguf)
    assert header["general.architecture"] == "qwen2" and header["qwen2.block_count"] == 24
    # llama.cpp keeps a repacked copy of the weights beside the mapped file, and a KV cache that grows with n_ctx
    assert footprint(small_gguf, 8192, "plain") > footprint(small_gguf, 4096, "plain") > 2 * small_gguf.stat().st_size
    (tmp_path / "cut.gguf").write_bytes(small_gguf.read_bytes()[:40])
    for bad in (tmp_path / "cut.gguf", Path(__file__)):
        with pytest.raises(NotGGUF):
            read_header(bad)
    assert parse_size("6G") == 6 << 30 and parse_size("800M") == 800 << 20 and parse_size("1.5GiB") == 3 << 29


def greedy_m(tmp_path, fake_embedder):
    """A rounds run over a space of the generator and top_k (scripted models), and how its sessions get them."""
    big, small, judge = ScriptedLLM("big"), ScriptedLLM("small"), ScriptedLLM("judge")
    space = {"params": {"generator": GENERATORS, "top_k": {"type": "int", "low": 3, "high": 5}}}
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    spec = StudySpec("g", StudySettings(["faithfulness"], sampler="random", seed=1), tmp_path / "space.yaml",
                     project_of(tmp_path), limit=2, studies_dir=tmp_path / "studies")
    return spec, lambda s: s.runner(models=Models(big, judge, {"small": small}), embedder=fake_embedder)


def test_rounds_settle_the_models_first_then_search_the_rest_around_them(tmp_path, fake_embedder):
    spec, prepare = greedy_m(tmp_path, fake_embedder)
    outcomes, _ = run_rounds(spec, rounds=2, trials=3, reports_dir=tmp_path / "reports", prepare=prepare)

    first, second = (read_study(study_folder(tmp_path / "studies", o.study)) for o in outcomes)
    assert set(first.space.params) == {"generator"}  # round 1: the models, every other knob at the base
    assert {t.pipeline["top_k"] for t in first.trials if t.result} == {5}
    chosen = first.best.pipeline["generator"]
    assert second.space.params["generator"].choices == [chosen]  # round 2: around the chosen model
    assert {t.pipeline["generator"] for t in second.trials if t.result} == {chosen}
    assert len({t.pipeline["top_k"] for t in second.trials if t.result}) > 1
    journey = (tmp_path / "reports" / "g" / "journey.md").read_text()
    assert "settles the models first (generator), every other knob at the base" in journey
    assert f"the models fixed at round 1's choice: generator={chosen}" in journey
    assert "searches top_k around them" in journey


def test_a_greedy_m_run_resumed_without_its_space_still_searches_around_the_chosen_models(tmp_path, fake_embedder):
    spec, prepare = greedy_m(tmp_path, fake_embedder)

    def stopped_in_round_2(session, trials, timeout):
        if session.folder.name != "g":
            raise KeyboardInterrupt
        session.run(trials, timeout)

    with pytest.raises(KeyboardInterrupt):
        run_rounds(spec, rounds=2, trials=3, reports_dir=tmp_path / "reports", prepare=prepare, run=stopped_in_round_2)
    # `tuner optimize --study g --rounds 2` with no --search-space resumes from the space round 1 recorded
    recorded = replace(spec, search_space=tmp_path / "studies" / "g" / "space.yaml")
    outcomes, _ = run_rounds(recorded, rounds=2, trials=3, reports_dir=tmp_path / "reports", prepare=prepare)

    first, second = (read_study(study_folder(tmp_path / "studies", o.study)) for o in outcomes)
    assert set(first.space.params) == {"generator"}
    assert second.space.params["generator"].choices == [first.best.pipeline["generator"]]
    assert not second.space.params["top_k"].single  # the rest of the whole space, not the analysis's proposal


def test_each_embedder_retrieves_from_its_own_index_with_its_vectors_cached(tmp_path, real_embedder, tiny_embedder):
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    tiny = str(tiny_embedder)
    runner = RagRunner(open_workspace(project, embedder=real_embedder, cache=tmp_path / "cache"))
    mini, other = PipelineConfig(), PipelineConfig(embedder=tiny, alpha=1.0)
    first = runner.evaluate(mini.model_copy(update={"alpha": 1.0}), answer=False)
    second = runner.evaluate(other, answer=False)
    assert chunks(first) != chunks(second)
    pipeline = runner.pipeline
    assert [s.embedder for s, _ in pipeline.indexes.built] == [tiny]
    # the embedding reranker takes the trial's embedder, or the model reranker_model names
    question = runner.workspace.dataset.questions[0].text
    own = pipeline.run(question, PipelineConfig(reranker="embedding"))
    named = pipeline.run(question, PipelineConfig(reranker="embedding", reranker_model=tiny))
    assert not np.allclose([c.confidence for c in own.reranked], [c.confidence for c in named.reranked])

    again = RagRunner(open_workspace(project, embedder=real_embedder, cache=tmp_path / "cache"))
    repeat = again.evaluate(other, answer=False)
    assert again.pipeline.embedders(tiny).misses == 0  # chunks and questions: the cache's
    assert chunks(repeat) == chunks(second)


def chunks(result) -> list[list[str]]:
    """The chunks each question's retrieval selected."""
    return [[p.chunk_id for p in q.selected] for q in result.questions]


@pytest.fixture(scope="module")
def large_gguf() -> Path:
    """The 1.5B model's GGUF (`tuner models install qwen2.5-1.5b`; `make test` installs it)."""
    from tests.helpers import require_real
    from tuner.models.registry import NAMED_MODELS, locate

    located = locate(NAMED_MODELS["qwen2.5-1.5b"])
    if located.path is None or not located.ready:
        require_real(f"qwen2.5-1.5b: {located.status}")
    return located.path


@pytest.mark.slow
def test_a_model_that_does_not_fit_beside_another_unloads_it_and_it_loads_again_when_asked(
        tmp_path, small_gguf, large_gguf, monkeypatch):
    from tuner.models.llms._llama_cpp import LlamaCppLLM

    small, large = LlamaCppLLM(small_gguf, n_threads=2), None
    ask = [{"role": "user", "content": "Name one colour. One word."}]
    before = small.chat(ask, max_tokens=4).text
    monkeypatch.setenv(BUDGET_ENV, str(small.footprint + footprint(large_gguf, 4096, "fast") - 1))
    try:
        large = LlamaCppLLM(large_gguf, n_threads=2)
        assert small._llama is None and large._llama is not None  # unloaded to make room
        assert small.chat(ask, max_tokens=4).text == before  # loaded again, the same model
        assert large._llama is None and small._llama is not None
        monkeypatch.setenv(BUDGET_ENV, "64G")
        large.chat(ask, max_tokens=2)
        assert small._llama is not None and large._llama is not None  # room for both: both stay
    finally:
        for llm in (small, large):
            if llm is not None:
                llm.close()


@pytest.mark.slow
def test_the_models_space_runs_for_real_with_two_generators_and_settles_them_first(
        tmp_path, small_gguf, large_gguf, tiny_embedder):
    """search_spaces/models.yaml with the test's second embedder added, the 0.5B as the fixed judge, two rounds."""
    space = yaml.safe_load((ROOT / "search_spaces" / "models.yaml").read_text())
    for knob in ("embedder", "reranker_model"):
        space["params"][knob]["choices"].append(str(tiny_embedder))
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"judge": {"model": "qwen2.5-0.5b"},
                                                         "dataset": {"limit": 4}}))
    run = subprocess.run([sys.executable, "-m", "tuner", "optimize", "--target", "faithfulness", "--trials", "3",
                          "--rounds", "2", "--search-space", "models.yaml", "--config", "tuner.yaml", "--study", "m",
                          "--sampler", "random", "--seed", "2", "--holdout", "0.5"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=2400)  # ~5 min alone on 2 cores
    assert run.returncode == 0, run.stderr
    first, second = (read_study(study_folder(tmp_path / "studies", n)) for n in ("m", "m.r2"))
    assert set(first.space.params) == {"generator", "embedder", "reranker", "reranker_model"}
    answered = {t.pipeline["generator"]: t.result.models["generator"] for t in first.trials if t.result}
    assert set(answered) == {"qwen2.5-0.5b", "qwen2.5-1.5b"} and len(set(answered.values())) == 2
    assert {t.result.models["judge"] for t in first.trials + second.trials if t.result} == {answered["qwen2.5-0.5b"]}
    chosen = {k: first.best.pipeline[k] for k in ("generator", "embedder")}
    assert all(t.pipeline[k] == v for t in second.trials if t.result for k, v in chosen.items())
    journey = (tmp_path / "reports" / "m" / "journey.md").read_text()
    assert "settles the models first" in journey and "the models fixed at round 1's choice: generator=" in journey
    report = (tmp_path / "reports" / "m" / "report.md").read_text()
    assert "also the generator of trial" in report  # the 0.5B judged its own answers in some trials
