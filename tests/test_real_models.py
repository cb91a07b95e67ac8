"""End to end with real parts: the 0.5B GGUF generating and judging, MiniLM embeddings, RAGAS metrics, on 2
demo questions; then the same evaluation through the CLI, paid entirely from the cache."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers import tuner
from tuner.config import LlamaCppConfig, PipelineConfig, ProjectConfig
from tuner.evaluation.rag_eval import RagRunner
from tuner.evaluation.records import EvalResult
from tuner.workspace import open_workspace

pytestmark = pytest.mark.slow
METRICS = {"faithfulness", "answer_relevancy", "context_precision", "context_recall"}


@pytest.fixture(scope="module")
def project(tmp_path_factory, small_gguf):
    cache = tmp_path_factory.mktemp("real-cache")
    return ProjectConfig(cache_dir=cache, generator=LlamaCppConfig(model="qwen2.5-0.5b", path=small_gguf),
                         pipeline=PipelineConfig(top_k=2))


@pytest.fixture(scope="module")
def first_run(project, real_embedder):
    runner = RagRunner(open_workspace(project, limit=2, embedder=real_embedder))
    return runner.evaluate(project.pipeline)


def test_real_model_answers_and_all_four_metrics_are_scored(first_run):
    assert set(first_run.metrics) == METRICS
    for metric, value in first_run.metrics.items():
        assert value is not None and 0.0 <= value <= 1.0, (metric, first_run.failures)
    assert first_run.cost.llm_calls >= 2 * (1 + 1 + 3 + 2 + 1)  # generate, F (a sentence at least), AR, CP (2), CR
    assert first_run.cost.prompt_tokens > 1000
    for question in first_run.questions:
        assert question.answer and not question.generation_error
        assert len(question.contexts) == 2


def test_the_cli_rerun_costs_zero_llm_calls(first_run, project, tmp_path):
    config = project.model_dump(mode="json", exclude_defaults=True)
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump(config))
    result = tuner("eval", "--config", "tuner.yaml", "--limit", "2", "--out", "again.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr  # not even from a model freed at interpreter shutdown
    again = EvalResult.from_json(json.loads((tmp_path / "again.json").read_text()))  # the JSON is the record
    assert again.cost.llm_calls == 0
    assert again.cost.cache_hits == first_run.cost.llm_calls + first_run.cost.cache_hits
    # Same answers and verdicts; embeddings are recomputed in other batches, which moves float sums in the 8th digit.
    assert again.metrics == pytest.approx(first_run.metrics, abs=1e-6)
    assert [q.answer for q in again.questions] == [q.answer for q in first_run.questions]
    assert "faithfulness" in result.stdout and "cost" in result.stdout


def test_compare_with_the_real_judge_pays_each_call_once(first_run, project, tmp_path):
    """`tuner compare`: the 0.5B answering and judging the same 2 questions for top_k 2 (the first run's, from its
    cache) and top_k 1; run again, it comes entirely from the cache, with the same figures."""
    base = project.model_dump(mode="json", exclude_defaults=True)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "new.yaml").write_text(yaml.safe_dump({**base, "pipeline": {"top_k": 1}}))
    first = tuner("compare", "base.yaml", "new.yaml", "--limit", "2", "--json", cwd=tmp_path)
    assert first.returncode in (0, 1) and "Traceback" not in first.stderr, first.stderr
    record = json.loads(first.stdout)
    [faithfulness] = record["metrics"]
    assert faithfulness["metric"] == "faithfulness" and record["questions"] == 2
    assert record["llm_calls_paid"]["base"] == 0 and record["llm_calls_paid"]["new"] > 0  # base: the first run's
    # the exit code is the gate's rule on the figures it printed
    assert (first.returncode == 1) == (faithfulness["verdict"] == "worse" and faithfulness["difference"] < -0.02)
    again = tuner("compare", "base.yaml", "new.yaml", "--limit", "2", "--json", cwd=tmp_path)
    repeated = json.loads(again.stdout)
    assert again.returncode == first.returncode and repeated["llm_calls_paid"] == {"base": 0, "new": 0}
    assert repeated["metrics"] == record["metrics"]


def test_strict_program_is_a_different_prompt_with_its_own_answers(project, real_embedder):
    runner = RagRunner(open_workspace(project, limit=1, embedder=real_embedder))
    strict = runner.evaluate(project.pipeline.model_copy(update={"program": "strict"}), metrics=["faithfulness"])
    assert strict.models["program"] == "strict"
    assert strict.cost_by_stage["generate"].llm_calls == 1  # not served from the default program's cache
    assert strict.questions[0].answer


def test_cli_errors_are_one_line(tmp_path, small_gguf):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 1000)
    cases = {
        "broken.yaml": ({"generator": {"path": str(broken)}}, "cannot load as a GGUF model"),
        "down.yaml": ({"generator": {"backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1",
                                     "model": "m", "timeout": 5}}, "cannot reach the LLM endpoint"),
    }
    for name, (config, message) in cases.items():
        (tmp_path / name).write_text(yaml.safe_dump({**config, "cache_dir": str(tmp_path / "c")}))
        result = tuner("eval", "--config", name, "--limit", "1", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) <= 3, result.stderr  # notes + the error line
