"""The shared cache: studies of one project share LLM calls and embeddings, `--own-cache` opts out, studies made
before sharing keep their own folder's cache, and `tuner cache info|prune` shows and trims it."""

from __future__ import annotations

import json
import os
import sqlite3
import time

import numpy as np

from tests.fakes import HashingEmbedder, ScriptedLLM
from tuner.cache import DiskCache, today
from tuner.models.embedders import CachedEmbedder
from tuner.models.embedders._cache import describe_shards, prune_shards

STUDY = ["optimize", "--trials", "1", "--search-space", "quick", "--limit", "3", "--holdout", "0",
         "--judge-check", "off"]


def test_entries_are_tagged_with_their_model_and_pruned_by_model_or_age(tmp_path):
    cache = DiskCache(tmp_path / "calls.sqlite")
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
    cache = DiskCache(path)
    assert cache.get("old") == {"text": "kept"}
    assert [(g.tag, g.entries) for g in cache.summary()] == [(None, 1)]
    assert cache.prune(tag="qwen") == 0  # untagged entries match no model


def test_embedding_shards_are_merged_and_unused_ones_dropped(tmp_path):
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    for text in ("a", "b", "c"):
        cached.encode([text])  # one shard per call
    folder = cached.folder
    assert describe_shards(folder)[:2] == (3, 3)
    old = sorted(folder.glob("shard-*.npz"), key=lambda p: p.stat().st_mtime)[0]
    os.utime(old, (time.time() - 40 * 86400,) * 2)
    with np.load(old) as data:
        forgotten = data["keys"].tolist()
    assert prune_shards(folder, unused_days=30) == (1, 2)
    assert describe_shards(folder)[:2] == (1, 2)  # the rest in one shard

    reopened_inner = HashingEmbedder()
    reopened = CachedEmbedder(reopened_inner, tmp_path)
    vectors = reopened.encode(["a", "b", "c"])
    assert reopened_inner.texts_encoded == 1 and len(forgotten) == 1  # only the dropped text is embedded again
    np.testing.assert_array_equal(vectors, inner.encode(["a", "b", "c"]))


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
    assert len(DiskCache(tmp_path / "studies" / "c" / "cache" / "llm_calls.sqlite")) > 0
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
    calls = DiskCache(tmp_path / "studies" / ".cache" / "llm_calls.sqlite")
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
