"""On-disk embedding cache keyed by (model name, text): no text is ever embedded twice.

Vectors live in append-only .npz shards under <cache_dir>/embeddings/<model>/; a shard is written to a
temporary name and renamed, so a killed process never leaves a half-written cache behind, and processes
sharing the cache (several studies on one corpus) never write the same file. A shard's mtime is the last time it
was loaded: `tuner cache prune` drops shards unused for a while and merges the rest into one.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tuner.models.embedders._base import Embedder, ProgressCallback


class CachedEmbedder(Embedder):
    def __init__(self, embedder: Embedder, cache_dir: Path):
        self.inner = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.folder = Path(cache_dir) / "embeddings" / re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder.name)
        self._rows: dict[str, np.ndarray] = {}
        self._load()
        self.misses = 0

    def encode(self, texts: Sequence[str], on_progress: ProgressCallback | None = None) -> np.ndarray:
        keys = [text_key(text) for text in texts]
        missing = list({k: t for k, t in zip(keys, texts) if k not in self._rows}.items())
        if on_progress:
            on_progress(len(texts) - len(missing))
        if missing:
            vectors = self.inner.encode([t for _, t in missing], on_progress)
            new_keys = np.array([k for k, _ in missing])
            write_shard(self.folder, new_keys, vectors)
            self._rows.update(zip(new_keys.tolist(), vectors))
            self.misses += len(missing)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[k] for k in keys])

    def _load(self) -> None:
        for shard in shards(self.folder):
            try:
                with np.load(shard) as data:
                    self._rows.update(zip(data["keys"].tolist(), data["vectors"]))
                os.utime(shard)  # loaded = used
            except FileNotFoundError:  # merged by a `tuner cache prune` meanwhile: at worst a text is embedded again
                continue


def write_shard(folder: Path, keys: np.ndarray, vectors: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    name = f"shard-{uuid.uuid4().hex}"
    tmp = folder / f"{name}.tmp.npz"
    np.savez(tmp, keys=keys, vectors=vectors.astype(np.float32))
    os.replace(tmp, folder / f"{name}.npz")
    return folder / f"{name}.npz"


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("shard-*[0-9a-f].npz"))  # not a *.tmp.npz being written


def embedding_models(cache_dir: Path) -> list[Path]:
    """One folder per embedding model in a cache."""
    root = Path(cache_dir) / "embeddings"
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def describe_shards(folder: Path) -> tuple[int, int, int, float]:
    """(shards, vectors, bytes, time of the last load) of one model's folder."""
    files = shards(folder)
    vectors = 0
    for shard in files:
        with np.load(shard) as data:
            vectors += len(data["keys"])
    return len(files), vectors, sum(f.stat().st_size for f in files), max((f.stat().st_mtime for f in files), default=0)


def prune_shards(folder: Path, unused_days: int | None) -> tuple[int, int]:
    """Drop the shards not loaded for `unused_days` days (None: keep all), then merge the rest into one shard so a
    load opens one file; returns (vectors dropped, vectors kept)."""
    now, dropped, rows, merged = time.time(), 0, {}, []
    for shard in shards(folder):
        with np.load(shard) as data:
            if unused_days is not None and now - shard.stat().st_mtime > unused_days * 86400:
                dropped += len(data["keys"])
                shard.unlink()
                continue
            rows.update(zip(data["keys"].tolist(), data["vectors"]))  # two writers may have embedded one text
        merged.append(shard)
    if len(merged) > 1:  # the merged shard is in place before the parts go: a kill here loses nothing
        write_shard(folder, np.array(list(rows)), np.stack(list(rows.values())))
        for shard in merged:
            shard.unlink()
    kept = len(rows)
    return dropped, kept


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
