import re

import pytest
from pydantic import ValidationError

from tuner.config import (
    INDEX_KNOBS,
    KNOBS,
    EndpointConfig,
    IndexSettings,
    LlamaCppConfig,
    PipelineConfig,
    ProjectConfig,
    load_config,
    setting_at,
)
from tuner.errors import ConfigError
from tuner.legacy import EVALUATION_AS_BEFORE, PROJECT_AS_BEFORE, recorded_project
from tuner.study.optimize import project_hash


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
        ("generator:\n  speculative: prompt-lookup\n  decoding: plain\n",
         "speculative: prompt-lookup needs decoding: fast"),
        ("generator:\n  speculative: qwen2.5-0.5b\n  decoding: plain\n",
         "speculative: qwen2.5-0.5b needs decoding: fast"),
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


#: what study.json held before the LLM settings were typed by backend: both backends' keys in every dump
FLAT_LLAMA = {"backend": "llama-cpp", "model": "qwen2.5-0.5b", "path": None, "n_ctx": 2048, "n_threads": None,
              "decoding": "fast", "base_url": None, "api_key_env": None, "timeout": 120.0, "max_tokens": None}
FLAT_ENDPOINT = {**FLAT_LLAMA, "backend": "openai-compatible", "base_url": "http://127.0.0.1:8000/v1", "model": "m",
                 "n_ctx": 4096, "timeout": 30.0}


SYSTEM_KNOBS = {"k": {"type": "int", "default": 4}, "prompt": {"type": "str", "default": "plain"}}


@pytest.mark.parametrize("system, pinned", [
    ({"python": "mysystem:answer", "path": "/srv/rag", "version": "3", "knobs": SYSTEM_KNOBS},
     "ecf3fe047cdd4b8629ae4ec855b2ac649898b45fa714c775eab72257e2744c57"),
    ({"http": "http://127.0.0.1:8000/answer", "version": "1", "knobs": SYSTEM_KNOBS, "api_key_env": "RAG_TOKEN"},
     "dd208affed7b6692ca3549f2cd3eae6210db31bc30603e053d41c1a15fb62ef0"),
])
def test_a_system_project_hashes_as_its_studies_recorded_it(system, pinned):
    """The project hash of a Python-system and an HTTP-system project as tuner computed it at 548e854: a study of
    either resumes with its configurations recognised. How fast the system answers, and the judge's cut (it
    changes no score), move nothing."""
    assert project_hash(ProjectConfig(system=system)) == pinned
    assert project_hash(ProjectConfig(system={**system, "timeout": 30, "concurrency": 4},
                                      evaluation={"cut": 0.8})) == pinned


def test_one_model_answering_and_judging_reads_a_question_s_passages_once_by_default():
    """Where the generator judges, tuner writes the answers and the verdicts are the judge's default ones, the answer
    prompt and the verdicts begin with the same numbered passages; anything else keeps the layouts of before, and a
    study recorded before them resumes under them."""
    shared = ("context-first", "numbered")
    for project in (ProjectConfig(), ProjectConfig(judge=LlamaCppConfig()),
                    ProjectConfig(evaluation={"metrics": ["faithfulness"], "cut": 0.8})):
        assert (project.answer_layout, project.evaluation.verdict_contexts) == shared
    for project, layouts in (
            (ProjectConfig(judge={"model": "qwen2.5-0.5b"}), ("instructions-first", "joined")),
            (ProjectConfig(answer_layout="passages-first"), ("passages-first", "joined")),
            (ProjectConfig(evaluation={"verdict_contexts": "joined"}), ("instructions-first", "joined")),
            (ProjectConfig(evaluation={"verdict_contexts": "chunks"}), ("instructions-first", "chunks")),
            (ProjectConfig(evaluation={"blend": "lexical"}), ("instructions-first", "joined")),
            (ProjectConfig(evaluation={"verdict_prompt": "nli"}), ("instructions-first", "joined")),
            (ProjectConfig(evaluation={"verdicts": "sampled"}), ("instructions-first", "joined")),
            (ProjectConfig(system={"python": "mysystem:answer", "version": "3"}), ("instructions-first", "joined")),
            (ProjectConfig.model_validate(recorded_project({"evaluation": {"verdicts": "graded"}})),
             ("instructions-first", "joined"))):
        assert (project.answer_layout, project.evaluation.verdict_contexts) == layouts
    # another study than one under the layouts of before; drafting answers is speed only
    assert project_hash(ProjectConfig()) != project_hash(ProjectConfig(answer_layout="instructions-first"))
    assert project_hash(ProjectConfig(generator={"speculative": "prompt-lookup"})) == project_hash(ProjectConfig())


def test_old_flat_llm_configs_load_unchanged_and_hash_as_before(caplog):
    # a study.json from before the typed configs: a record tuner wrote
    project = ProjectConfig.model_validate({"generator": FLAT_ENDPOINT, "judge": FLAT_LLAMA}, context={"record": True})
    assert isinstance(project.generator, EndpointConfig) and project.generator.timeout == 30.0
    assert isinstance(project.judge, LlamaCppConfig) and project.judge.n_ctx == 2048
    assert caplog.records == []  # the other backend's keys sat at their defaults: nothing to say
    # the project hash of these configs as tuner computed it before the typed configs (commit 64ac1ce): a resumed
    # study (whose recorded project reads as sampled verdicts: StudyMeta.config) still recognises the configurations
    # it ran
    before = {"evaluation": EVALUATION_AS_BEFORE, **PROJECT_AS_BEFORE}
    assert project_hash(ProjectConfig(**before)) == "51b30cfd1030fe0a972361a105ad09fbeaea1a754edc6932ac0b7f3115ba3c34"
    assert project_hash(ProjectConfig.model_validate({"judge": {"model": "qwen2.5-0.5b", "n_ctx": 2048}, **before})) \
        == "265882dc2361278b2f93d258b1ab60044bc576eaba2d446e4b8cb2eb678e4e36"
    # memory for saved prefixes is outside a study's identity (it sets the pace; docs say how it can round a token
    # differently); a study recorded before the answer layout existed
    # asks as it did (instructions first, today's default too), and one laid out passages first is another study
    assert project_hash(ProjectConfig.model_validate({"judge": {"model": "qwen2.5-0.5b", "n_ctx": 2048,
                                                                "prefix_memory": 256}, **before})) \
        == "265882dc2361278b2f93d258b1ab60044bc576eaba2d446e4b8cb2eb678e4e36"
    recorded = ProjectConfig.model_validate(recorded_project({"evaluation": EVALUATION_AS_BEFORE}))
    assert recorded.answer_layout == "instructions-first" and project_hash(recorded) == project_hash(
        ProjectConfig(**before)) == project_hash(ProjectConfig(evaluation=EVALUATION_AS_BEFORE)) != project_hash(
        ProjectConfig(evaluation=EVALUATION_AS_BEFORE, answer_layout="passages-first"))
    endpoint = {"backend": "openai-compatible", "base_url": "http://x/v1", "model": "m", "timeout": 30}
    # an endpoint at the default timeout hashes as before (390a…); how long tuner waits and how many questions are
    # in flight decide the pace, not a score: a study resumed with timeout 30 or 8 in flight is the same study (a
    # study begun with a timeout other than the default, before this rule, hashed it: its earlier trials run once
    # more, from the cache)
    for changed in ({"timeout": 120}, {}, {"timeout": 20, "concurrency": 8}):
        assert project_hash(ProjectConfig.model_validate({"generator": {**endpoint, **changed}, **before})) == \
            "390a62c66813e8d41b29cde40877874e744caa0b183be6a82cf98dd73d1f746d"
    # in a record, a setting another backend reads did nothing then either: it is dropped, and said
    assert ProjectConfig.model_validate({"generator": {**endpoint, "n_ctx": 8192}}, context={"record": True}) \
        .generator == EndpointConfig.model_validate(endpoint)
    assert "n_ctx is not a setting of LLM backend openai-compatible: ignored" in caplog.text
    # written by the user now, it is a mistake: refused, at any value
    for n_ctx in (8192, 4096):
        with pytest.raises(ValidationError, match="n_ctx is a setting of backend llama-cpp only"):
            ProjectConfig.model_validate({"generator": {**endpoint, "n_ctx": n_ctx}})


def test_llm_config_errors_name_the_key_the_user_wrote(tmp_path):
    config = tmp_path / "tuner.yaml"
    config.write_text("generator:\n  n_ctx: 100\n")
    with pytest.raises(ConfigError, match=r"generator\.n_ctx: Input should be greater than or equal to 512"):
        load_config(config)
    config.write_text("judge:\n  backend: openai-compatible\n  model: m\n")
    with pytest.raises(ConfigError, match="judge: backend openai-compatible needs base_url"):
        load_config(config)
    config.write_text("generator:\n  concurrency: 4\n")  # llama.cpp in process answers one call at a time
    with pytest.raises(ConfigError, match="generator: concurrency is a setting of backend openai-compatible only"):
        load_config(config)


def test_a_config_dumped_without_defaults_loads_back_as_the_same_backend():
    """`tuner best --out` dumps without defaults: the backend must survive it, or an endpoint loads as llama.cpp."""
    for generator in (EndpointConfig(base_url="http://127.0.0.1:8000/v1", model="m"), LlamaCppConfig(n_ctx=2048)):
        project = ProjectConfig(generator=generator)
        dumped = project.model_dump(mode="json", exclude_defaults=True)
        assert dumped["generator"]["backend"] == generator.backend
        assert ProjectConfig.model_validate(dumped) == project


def test_every_index_knob_names_the_project_setting_its_index_reads():
    project = ProjectConfig()
    assert set(INDEX_KNOBS) == set(IndexSettings.model_fields) == {n for n, k in KNOBS.items() if k.index}
    own = project.index_settings()
    for name, path in INDEX_KNOBS.items():  # each path resolves, and the project's index reads it
        assert getattr(own, name) == setting_at(project, path), name
        assert str(getattr(own, name)) in own.describe(), f"{name} is missing from what the index is described as"
    changed = ProjectConfig.model_validate({"chunking": {"size": 90}, "backend": {"bm25": {"stemmer": "english"}}})
    assert (changed.index_settings().chunk_size, changed.index_settings().stemmer) == (90, "english")
    # a pipeline's index knob wins over the project's setting
    assert changed.index_settings(PipelineConfig(chunk_size=60)).chunk_size == 60
