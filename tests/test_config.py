import re

import pytest

from tuner.config import PipelineConfig, ProjectConfig, load_config
from tuner.errors import ConfigError


def write(tmp_path, text):
    path = tmp_path / "tuner.yaml"
    path.write_text(text)
    return path


def test_no_file_means_defaults_on_the_demo():
    config = load_config(None)
    assert config == ProjectConfig()
    assert config.dataset.path is None
    assert config.pipeline.alpha == 0.5 and config.pipeline.fusion == "relative_score"


def test_relative_paths_resolve_against_the_file(tmp_path):
    config = load_config(write(tmp_path, "dataset:\n  path: data/set\ncache_dir: cache\npipeline:\n  top_k: 7\n"))
    assert config.dataset.path == tmp_path / "data" / "set"
    assert config.cache_dir == tmp_path / "cache"
    assert config.pipeline.top_k == 7


def test_malformed_yaml_names_the_file_and_the_line(tmp_path):
    path = write(tmp_path, "pipeline:\n  top_k: [5\n  alpha: 0.3\n")
    with pytest.raises(ConfigError, match=r"tuner.yaml: invalid YAML at line \d+, column \d+") as caught:
        load_config(path)
    assert caught.value.exit_code == 2
    assert "\n" not in str(caught.value)


def test_wrong_type_names_the_key_and_what_was_expected(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, "pipeline:\n  top_k: many\n"))
    message = str(caught.value)
    assert "tuner.yaml" in message and "pipeline.top_k" in message and "integer" in message and "'many'" in message


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pipeline:\n  alpha: 1.5\n", "pipeline.alpha: Input should be less than or equal to 1"),
        ("pipeline:\n  top_k: true\n", "top_k: expected a number, got true"),  # YAML booleans are not ints
        ("pipeline:\n  autocut: 1\n  confidence_threshold: 0.5\n", "autocut and confidence_threshold both choose K"),
        ("backend:\n  bm25:\n    stemmer: porter\n", "backend.bm25.stemmer: Input should be 'none' or 'english'"),
        ("pipeline:\n  fusion: borda\n",
         "pipeline.fusion: Input should be 'relative_score', 'ranked', 'zscore' or 'dbsf'"),
        ("pipline:\n  top_k: 3\n", "pipline: unknown key"),
        ("chunking:\n  size: 50\n  overlap: 50\n", "overlap (50) must be smaller than size (50)"),
        ("pipeline:\n  min_docs: 5\n  max_docs: 2\n", "min_docs (5) must not exceed max_docs (2)"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
def test_invalid_values_give_one_clear_line(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=re.escape(expected)) as caught:
        load_config(write(tmp_path, text))
    assert len(str(caught.value).splitlines()) == 1


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_pipeline_config_bounds():
    assert PipelineConfig(hops=3).hops == 3
    with pytest.raises(ValueError):
        PipelineConfig(hops=4)


def test_the_judge_gets_a_verdict_sized_budget_not_the_answer_budget():
    from tuner.config import ProjectConfig

    shared = ProjectConfig.model_validate({"generator": {"max_tokens": 200}})
    assert (shared.answer_tokens, shared.judge_tokens) == (200, 1024)
    own = ProjectConfig.model_validate({"judge": {"model": "qwen2.5-1.5b", "max_tokens": 2048}})
    assert (own.answer_tokens, own.judge_tokens) == (384, 2048)
