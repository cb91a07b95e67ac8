"""The shared cache: studies of one project share LLM calls and embeddings, `--own-cache` opts out, studies made
before sharing keep their own folder's cache, and `tuner cache info|prune` shows and trims it."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from tests.fakes import HashingEmbedder, ScriptedLLM
from tuner.cache import SqliteStore, today
from tuner.models.embedders import CachedEmbedder
from tuner.models.embedders._cache import text_key

STUDY = ["optimize", "--trials", "1", "--search-space", "quick", "--limit", "3", "--holdout", "0",
         "--judge-check", "off"]


def test_entries_are_tagged_with_their_model_and_pruned_by_model_or_age(tmp_path):
    cache = SqliteStore(tmp_path / "calls.sqlite")
    cache.put("a", {"text": "x"}, tag="gguf:qwen-0.5b:1")
    cache.put("b", {"text": "y"}, tag="gguf:qwen-1.5b:2")
    cache.put("c", {"text": "z"}, tag="gguf:qwen-1.5b:2")
    assert [(g.tag, g.entries, g.last_used) for g in cache.summary()] == [
        ("gguf:qwen-0.5b:1", 1, today()), ("gguf:qwen-1.5b:2", 2, today())]
    assert cache.prune(tag="1.5b") == 2 and len(cache) == 1 and cache.get("a") == {"text": "x"}

    cache._run("UPDATE entries SET used = ?", (today() - 40,))  # last used 40 days ago
    assert cache.get("a") == {"text": "x"}  # reading it marks it used today
    cache.put("d", {"text": "w"})
    cache._run("UPDATE entries SET used = ? WHERE key = 'd'", (today() - 40,))
    assert cache.prune(unused_days=30) == 1 and cache.get("d") is None and cache.get("a") is not None
    assert cache.prune() == 0 and len(cache) == 1  # no selector: nothing dropped


def test_a_cache_written_before_tags_opens_and_keeps_its_entries(tmp_path):
    path = tmp_path / "calls.sqlite"
    with sqlite3.connect(path) as db:  # the schema of tuner 0.3
        db.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, value TEXT NOT NULL, writes INTEGER NOT NULL "
                   "DEFAULT 1)")
        db.execute("INSERT INTO entries (key, value) VALUES ('old', '{\"text\": \"kept\"}')")
    cache = SqliteStore(path)
    assert cache.get("old") == {"text": "kept"}
    assert [(g.tag, g.entries) for g in cache.summary()] == [(None, 1)]
    assert cache.prune(tag="qwen") == 0  # untagged entries match no model


def test_embeddings_are_pruned_by_model_or_age(tmp_path):
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    first = cached.encode(["a", "b", "c"])
    store = SqliteStore(tmp_path / "embeddings.sqlite")
    assert [(g.tag, g.entries) for g in store.summary()] == [(inner.name, 3)]
    store._run("UPDATE entries SET used = ? WHERE key = ?", (today() - 40, cached.key("a")))
    assert store.prune(unused_days=30) == 1

    reopened_inner = HashingEmbedder()
    vectors = CachedEmbedder(reopened_inner, tmp_path).encode(["a", "b", "c"])
    assert reopened_inner.texts_encoded == 1  # only the dropped text is embedded again
    np.testing.assert_array_equal(vectors, first)
    assert store.prune(tag=inner.name) == 3 and len(store) == 0


def test_shards_of_an_older_cache_move_into_the_store(tmp_path):
    inner = HashingEmbedder()
    vectors = inner.encode(["a", "b"])
    folder = tmp_path / "embeddings" / inner.name
    folder.mkdir(parents=True)
    keys = np.array([text_key("a"), text_key("b")])
    np.savez(folder / "shard-0a.npz", keys=keys[:1], vectors=vectors[:1])
    np.savez(folder / "shard-0b.npz", keys=keys[1:], vectors=vectors[1:])
    (folder / "shard-0c.npz").write_bytes(b"half-written")  # a damaged shard: its texts are embedded again
    fresh = HashingEmbedder()
    cached = CachedEmbedder(fresh, tmp_path)
    np.testing.assert_array_equal(cached.encode(["b", "a"]), vectors[[1, 0]])
    assert fresh.calls == 0 and not folder.exists()
    assert len(SqliteStore(tmp_path / "embeddings.sqlite")) == 2


def test_studies_of_a_project_share_one_cache_unless_one_asks_for_its_own(cli_with, tmp_path):
    llm = ScriptedLLM()
    tuner = cli_with(llm)
    first = tuner(*STUDY, "--study", "a")
    assert first.exit_code == 0, first.output
    paid = len(llm.calls)
    assert paid and (tmp_path / "studies" / ".cache" / "llm_calls.sqlite").is_file()
    assert not (tmp_path / "studies" / "a" / "cache").exists()

    second = tuner(*STUDY, "--study", "b")  # the same baseline on the same questions: every call cached
    assert second.exit_code == 0, second.output
    assert len(llm.calls) == paid
    assert json.loads((tmp_path / "studies" / "b" / "trials" / "0000.json").read_text())["cost"]["llm_calls"] == 0

    own = tuner(*STUDY, "--study", "c", "--own-cache")
    assert own.exit_code == 0, own.output
    assert len(llm.calls) == 2 * paid and (tmp_path / "studies" / "c" / "cache" / "llm_calls.sqlite").is_file()
    resumed = tuner(*STUDY[:2], "2", *STUDY[3:], "--study", "c")  # a resume keeps the study's own cache
    assert resumed.exit_code == 0, resumed.output
    assert len(SqliteStore(tmp_path / "studies" / "c" / "cache" / "llm_calls.sqlite")) > 0
    assert json.loads((tmp_path / "studies" / "c" / "study.json").read_text())["cache"] == "own"
    own_listing, shared_listing = (tuner("cache", "info", "--study", name).output for name in ("c", "b"))
    assert "scripted" in own_listing and f"cache: {tmp_path / 'studies' / 'c' / 'cache'}\n" in own_listing
    assert f"cache: {tmp_path / 'studies' / '.cache'}\n" in shared_listing


def test_a_study_made_before_the_shared_cache_resumes_on_its_own(cli_with, tmp_path):
    llm = ScriptedLLM()
    tuner = cli_with(llm)
    assert tuner(*STUDY, "--study", "old", "--own-cache").exit_code == 0
    meta_file = tmp_path / "studies" / "old" / "study.json"
    meta = json.loads(meta_file.read_text())
    del meta["cache"]  # what tuner 0.3 wrote
    meta_file.write_text(json.dumps(meta))
    paid = len(llm.calls)
    resumed = tuner(*STUDY[:2], "2", *STUDY[3:], "--study", "old")
    assert resumed.exit_code == 0, resumed.output
    assert not (tmp_path / "studies" / ".cache" / "llm_calls.sqlite").exists()  # nothing went to a shared cache
    assert len(llm.calls) > paid


def test_cache_info_and_prune(cli_with, tmp_path):
    llm = ScriptedLLM()
    tuner = cli_with(llm)
    assert tuner(*STUDY, "--study", "a").exit_code == 0
    calls = SqliteStore(tmp_path / "studies" / ".cache" / "llm_calls.sqlite")
    entries = len(calls)
    shown = tuner("cache", "info")
    assert shown.exit_code == 0, shown.output
    assert "LLM calls" in shown.output and "scripted" in shown.output and str(entries) in shown.output

    kept = tuner("cache", "prune", "--unused-days", "30")  # all used today
    assert kept.exit_code == 0 and "dropped 0 LLM calls" in kept.output and len(calls) == entries
    dropped = tuner("cache", "prune", "--model", "scripted")
    assert dropped.exit_code == 0 and f"dropped {entries} LLM calls" in dropped.output and len(calls) == 0

    assert "part of a model name" in str(tuner("cache", "prune", "--model", " ").exception)
    assert "no study named 'nope'" in str(tuner("cache", "info", "--study", "nope").exception)
