"""Query strategies (none, hyde, decomposition, multi_query): rewrites parsed or fallen back from, several searches
merged by RRF, the calls cached and counted in a `query` stage; then each strategy with the real 0.5B model."""

from __future__ import annotations

import pytest

from tests.fakes import ScriptedLLM
from tests.helpers import DOCS, llm_calls_cached, written_index_twice
from tuner.config import LlamaCppConfig, PipelineConfig, ProjectConfig
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.provider import Models
from tuner.pipeline.query import QUERY_STRATEGIES, parse_questions, rewrite
from tuner.workspace import open_workspace


def test_written_questions_are_parsed_deduplicated_and_never_the_question_itself():
    reply = '{"questions": ["Who built it?", "who built  it?", "Where is it?", "", 3, "What is the bridge?"]}'
    assert parse_questions(reply, "What is the bridge?") == ["Who built it?", "Where is it?"]
    assert parse_questions('["Who built it?"]', "q") == ["Who built it?"]  # a bare list is taken too
    for garbage in ("Sure! Here are three questions:", '{"questions": "one"}', "null", ""):
        assert parse_questions(garbage, "q") == []


def test_a_rewrite_that_does_not_parse_falls_back_to_the_question():
    for strategy in ("decomposition", "multi_query"):
        fallen = rewrite("Who built the bridge?", strategy, ScriptedLLM(garbage=True))
        assert fallen.fell_back and [s.bm25 for s in fallen.searches] == ["Who built the bridge?"]
    written = rewrite("Who built the bridge?", "decomposition", ScriptedLLM())
    assert not written.fell_back and len(written.searches) == 4  # the question, then three sub-questions
    hyde = rewrite("Who built the bridge?", "hyde", ScriptedLLM())
    [search] = hyde.searches
    assert search.bm25.startswith("Who built the bridge? ") and search.dense == search.bm25.split("? ", 1)[1]
    with pytest.raises(ValueError, match="needs a generator"):
        rewrite("q", "hyde", None)


@pytest.fixture
def runner(fake_embedder, tmp_path):
    def make(llm):
        workspace = open_workspace(ProjectConfig(cache_dir=tmp_path), limit=4, embedder=fake_embedder)
        return RagRunner(workspace, models=Models(llm, llm))
    return make


@pytest.mark.parametrize("strategy", ["hyde", "decomposition", "multi_query"])
def test_each_strategy_searches_its_rewrite_cached_and_counted(runner, strategy):
    llm = ScriptedLLM()
    run = runner(llm)
    config = PipelineConfig(query=strategy)
    first = run.evaluate(config, answer=False)
    assert first.cost_by_stage["query"].llm_calls == 4 == len(llm.calls)  # one rewrite per question
    assert all(q.searched and not q.query_fell_back for q in first.questions)
    if strategy != "hyde":  # the written questions were searched, each merged into the question's list
        assert first.questions[0].searched[0] == "Which bridge crosses the river?"
    again = run.evaluate(config, answer=False)
    assert again.cost_by_stage["query"].llm_calls == 0 and again.cost_by_stage["query"].cache_hits == 4
    assert again.retrieval == first.retrieval
    plain = run.evaluate(PipelineConfig(), answer=False)
    assert "query" not in plain.cost_by_stage and len(llm.calls) == 4  # none calls no model


def test_a_strategy_whose_rewrites_fail_still_scores_every_question(runner):
    result = runner(ScriptedLLM(garbage=True)).evaluate(PipelineConfig(query="decomposition"), answer=False)
    assert result.failures["query"] == {"fallback": 4} and all(q.query_fell_back for q in result.questions)
    assert result.retrieval["questions_scored"] == 4 and result.retrieval["recall@10"] > 0


@pytest.mark.slow
def test_every_strategy_with_the_real_small_model(small_gguf, real_embedder, tmp_path):
    project = ProjectConfig(cache_dir=tmp_path, generator=LlamaCppConfig(model="qwen2.5-0.5b", path=small_gguf))
    runner = RagRunner(open_workspace(project, limit=2, embedder=real_embedder))
    wrote = 0
    for strategy in QUERY_STRATEGIES[1:]:
        result = runner.evaluate(PipelineConfig(query=strategy), answer=False)
        assert result.cost_by_stage["query"].llm_calls + result.cost_by_stage["query"].cache_hits == 2, strategy
        assert result.retrieval["questions_scored"] == 2 and result.retrieval["recall@10"] > 0, strategy
        written = [q for q in result.questions if not q.query_fell_back]
        assert all(q.searched for q in written), strategy  # what the model wrote was searched
        assert len(written) + result.failures.get("query", {}).get("fallback", 0) == 2, strategy
        wrote += len(written)
    assert wrote >= 4  # of 6 rewrites, the 0.5B model writes most in the shape asked


def test_a_study_searches_every_query_strategy_and_says_they_call_the_generator(tmp_path, cli_with):
    import json

    import yaml

    invoke = cli_with(ScriptedLLM())
    (tmp_path / "q.yaml").write_text(yaml.safe_dump({"params": {"query": {
        "type": "categorical", "choices": list(QUERY_STRATEGIES)}}}))
    result = invoke("optimize", "--target", "recall@5", "--search-space", "q.yaml", "--trials", "4", "--sampler",
                    "grid", "--limit", "3", "--study", "q", "--judge-check", "off")
    assert result.exit_code == 0, result.output
    assert "query (hyde, decomposition, multi_query: once per question) call the generator" in result.output
    trials = [json.loads(f.read_text()) for f in sorted((tmp_path / "studies" / "q" / "trials").glob("*.json"))]
    assert sorted(t["pipeline"]["query"] for t in trials) == sorted(QUERY_STRATEGIES)
    for trial in trials:
        assert ("query" in trial["cost_by_stage"]) == (trial["pipeline"]["query"] != "none")
    report = (tmp_path / "reports" / "q" / "report.md").read_text()
    assert "| query |" in report  # the knob in the space table


@pytest.mark.slow
def test_llm_written_contexts_with_the_real_small_model_through_the_cli(small_gguf, tmp_path):
    """The project's own index with `contextual: llm` (written before any evaluation), 3 documents, the 0.5B model:
    each chunk opens with what the model wrote; run again, every context comes from the cache."""
    first, again = written_index_twice(tmp_path, small_gguf, "contextual=llm")
    assert first["dataset"]["chunks"] == 3 and first["retrieval"]["recall@5"] == 1.0
    selected = [p["text"] for q in first["per_question"] for p in q["selected"]]
    assert all(text.split("\n")[0] not in {t for t, _ in DOCS.values()} for text in selected)  # written, not titles
    assert llm_calls_cached(tmp_path / "cache") == 3  # one call per chunk, none more the second time
    assert [p["text"] for q in again["per_question"] for p in q["selected"]] == selected  # from the cache


