"""On-disk embedding cache keyed by (model name, text): no text is ever embedded twice.

Vectors live in append-only .npz shards under <cache_dir>/embeddings/<model>/; a shard is written to a
temporary name and renamed, so a killed process never leaves a half-written cache behind.
"""

from __future__ import annotations

import hashlib
import os
import re
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
            self._write_shard(new_keys, vectors)
            self._rows.update(zip(new_keys.tolist(), vectors))
            self.misses += len(missing)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[k] for k in keys])

    def _load(self) -> None:
        for shard in sorted(self.folder.glob("shard-*.npz")):
            with np.load(shard) as data:
                self._rows.update(zip(data["keys"].tolist(), data["vectors"]))

    def _write_shard(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"shard-{uuid.uuid4().hex}"
        tmp = self.folder / f"{name}.tmp.npz"
        np.savez(tmp, keys=keys, vectors=vectors.astype(np.float32))
        os.replace(tmp, self.folder / f"{name}.npz")


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
