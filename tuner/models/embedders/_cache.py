"""The embedding cache keyed by (model name, text): no text is ever embedded twice, on this machine or, with a
study in a database, by any worker.

Vectors live in the `embeddings` store of the cache (tuner/cache.py), one entry per text, tagged with the model,
as base64 float32, written every WRITE_EVERY texts as they are embedded (a kill loses only the slice in progress;
another worker sharing the store picks up what is written). Caches from before kept .npz shards under
<cache_dir>/embeddings/<model>/: they are moved into the store the first time the model's cache is opened.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tuner.cache import KeyValue, is_database, open_store
from tuner.models.embedders._base import Embedder, ProgressCallback

#: texts embedded between writes to the store: a kill loses at most this many (seconds of work, not the corpus)
WRITE_EVERY = 256


class CachedEmbedder(Embedder):
    def __init__(self, embedder: Embedder, cache: Path | str):
        self.inner = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.window = embedder.window
        self.store = open_store(cache, "embeddings")
        if not is_database(cache):
            adopt_shards(Path(cache), self.store, self.name)
        self._rows: dict[str, np.ndarray] = {}  # what this process has read or embedded
        self.misses = 0

    def encode(self, texts: Sequence[str], on_progress: ProgressCallback | None = None) -> np.ndarray:
        keys = [self.key(text) for text in texts]
        unread = [k for k in dict.fromkeys(keys) if k not in self._rows]
        self._rows.update((k, unpack(v)) for k, v in self.store.get_many(unread).items())
        missing = list({k: t for k, t in zip(keys, texts) if k not in self._rows}.items())
        if on_progress:
            on_progress(len(texts) - len(missing))
        for start in range(0, len(missing), WRITE_EVERY):
            part = missing[start:start + WRITE_EVERY]
            # another worker sharing the store may have embedded some meanwhile
            found = self.store.get_many([k for k, _ in part])
            self._rows.update((k, unpack(v)) for k, v in found.items())
            if found and on_progress:
                on_progress(len(found))
            part = [(k, t) for k, t in part if k not in found]
            if not part:
                continue
            vectors = self.inner.encode([t for _, t in part], on_progress)
            self.store.put_many({k: pack(v) for (k, _), v in zip(part, vectors)}, tag=self.name)
            self._rows.update((k, v) for (k, _), v in zip(part, vectors))
            self.misses += len(part)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[k] for k in keys])

    def key(self, text: str) -> str:
        return f"{self.name}:{text_key(text)}"


def pack(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def unpack(value: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value), dtype=np.float32)


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def adopt_shards(cache_dir: Path, store: KeyValue, model: str) -> int:
    """Move an older cache's .npz shards of `model` into the store (then delete them); returns the vectors moved."""
    folder = cache_dir / "embeddings" / re.sub(r"[^A-Za-z0-9_.-]+", "_", model)
    if not folder.is_dir():
        return 0
    rows: dict[str, str] = {}
    for shard in sorted(folder.glob("shard-*.npz")):
        try:
            with np.load(shard) as data:
                rows.update((f"{model}:{k}", pack(v)) for k, v in zip(data["keys"].tolist(), data["vectors"]))
        except (OSError, ValueError, KeyError):  # a damaged or half-written shard: those texts are embedded again
            continue
    store.put_many(rows, tag=model)
    shutil.rmtree(folder)  # after the store holds them: a kill in between only reads the shards again
    return len(rows)


def cache_stores(location: Path | str) -> dict[str, KeyValue]:
    """A cache's stores that exist: "LLM calls" and "embeddings" (an absent file is not created to say so); the
    shards of a cache from before move into the embeddings store."""
    stores = {}
    for kind, name in (("LLM calls", "llm_calls"), ("embeddings", "embeddings")):
        if is_database(location) or (Path(location) / f"{name}.sqlite").is_file() or \
                (name == "embeddings" and (Path(location) / "embeddings").is_dir()):
            stores[kind] = open_store(location, name)
    if "embeddings" in stores and not is_database(location):
        for model in sorted(p.name for p in (Path(location) / "embeddings").glob("*") if p.is_dir()):
            adopt_shards(Path(location), stores["embeddings"], model)
    return stores
