"""Weaviate backend (weaviate-client v4): the chunks live in a Weaviate collection, stored with tuner's own vectors
(bring your own vector), so both backends search the same embeddings.

Like the embedded backend it answers the two candidate lists (`bm25`, `dense`) and tuner fuses them, which lets a
study try every alpha on one pair of queries. `hybrid` asks Weaviate's own fusion instead: `check_fusion` compares
the two orders on the same candidates, the proof that a tuned alpha means the same thing in a deployment.

Ingestion is idempotent: the collection is named after a fingerprint of the chunks, their vectors and the BM25
settings, and each chunk's UUID is that fingerprint plus its position. A second run finds the collection full and
adds nothing; a run killed mid-ingestion writes the same objects again. Positions are the UUID's last 12 hex
digits, so Weaviate's tie-break (UUID order) is chunk order, as in tuner's fusion.
"""

from __future__ import annotations

import hashlib
import os
import uuid
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from tuner.config import WEAVIATE_FUSIONS, Bm25Config, WeaviateConfig
from tuner.env import secret
from tuner.errors import ConfigError, DataError, first_line
from tuner.pipeline.backends._base import Hits, RetrievalBackend

#: objects per insert request
INGEST_BATCH = 500
#: the property holding a chunk's text (the only one: positions live in the UUID)
TEXT = "text"


def corpus_fingerprint(texts: Sequence[str], vectors: np.ndarray, bm25: Bm25Config) -> str:
    """What a collection holds: the chunks, their vectors and how its keyword index tokenises and scores."""
    digest = hashlib.sha256(bm25.model_dump_json().encode())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()


def chunk_uuid(fingerprint: str, position: int) -> str:
    """The fingerprint's first 20 hex digits, then the position in 12: UUID order is chunk order."""
    return str(uuid.UUID(fingerprint[:20] + f"{position:012x}"))


def chunk_position(object_uuid: uuid.UUID | str) -> int:
    return int(str(object_uuid)[-12:], 16)


def collection_name(prefix: str, fingerprint: str) -> str:
    return f"{prefix}_{fingerprint[:16]}"


def server_url(settings: WeaviateConfig) -> str | None:
    return settings.url or os.environ.get("WEAVIATE_URL")


def connection_arguments(settings: WeaviateConfig) -> dict[str, object]:
    """weaviate.connect_to_custom's arguments for the configured URL (or WEAVIATE_URL); the API key is read from
    the environment only, so it is never part of a config or a study."""
    url = server_url(settings)
    if not url:
        raise ConfigError("the weaviate backend needs a server: set backend.weaviate.url or WEAVIATE_URL "
                          "(e.g. http://localhost:8080)")
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port
    except ValueError as exc:  # a port that is no number, an unclosed [IPv6 bracket
        raise ConfigError(f"Weaviate URL {url!r}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"Weaviate URL {url!r}: expected http(s)://host[:port]")
    secure = parts.scheme == "https"
    arguments: dict[str, object] = {
        "http_host": parts.hostname, "http_port": port or (443 if secure else 8080), "http_secure": secure,
        "grpc_host": settings.grpc_host or parts.hostname, "grpc_port": settings.grpc_port, "grpc_secure": secure,
    }
    if key := secret(settings.api_key_env, "backend.weaviate.api_key_env", optional=True):
        from weaviate.classes.init import Auth

        arguments["auth_credentials"] = Auth.api_key(key)
    return arguments


@dataclass(frozen=True)
class Query:
    """One Weaviate query as tuner asks it: which search and its keyword arguments."""

    search: str  # "bm25", "near_vector" or "hybrid"
    arguments: dict[str, object]


def bm25_query(query: str, limit: int) -> Query:
    return Query("bm25", {"query": query, "query_properties": [TEXT], "limit": limit})


def dense_query(vector: np.ndarray, limit: int) -> Query:
    return Query("near_vector", {"near_vector": _floats(vector), "limit": limit})


def hybrid_query(query: str, vector: np.ndarray, alpha: float, fusion: str, limit: int) -> Query:
    if fusion not in WEAVIATE_FUSIONS:
        raise ConfigError(f"Weaviate fuses with {' or '.join(WEAVIATE_FUSIONS)}, not {fusion!r}")
    from weaviate.classes.query import HybridFusion

    return Query("hybrid", {"query": query, "vector": _floats(vector), "alpha": alpha, "limit": limit,
                            "fusion_type": getattr(HybridFusion, WEAVIATE_FUSIONS[fusion]), "query_properties": [TEXT]})


def _floats(vector: np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).tolist()


class WeaviateBackend(RetrievalBackend):
    def __init__(self, settings: WeaviateConfig, bm25: Bm25Config = Bm25Config()):
        if bm25.stemmer != "none":
            raise ConfigError(f"Weaviate does not stem: backend.bm25.stemmer {bm25.stemmer!r} needs the embedded "
                              f"backend (set it to none for weaviate)")
        try:
            import weaviate
            from weaviate.exceptions import WeaviateBaseError
        except ImportError:
            raise ConfigError("the weaviate backend needs weaviate-client: pip install 'rag-tuner[weaviate]'") from None
        self.settings, self.bm25_settings = settings, bm25
        arguments = connection_arguments(settings)
        self.where = f"Weaviate at {server_url(settings)}"
        self._errors = (WeaviateBaseError,)
        try:
            self.client = weaviate.connect_to_custom(**arguments)
        except (WeaviateBaseError, ValueError) as exc:  # ValueError: settings the client refuses (pydantic)
            raise ConfigError(f"{self.where}: cannot connect ({first_line(exc)})") from None
        weakref.finalize(self, self.client.close)
        self.collection = None
        self.name = ""
        self._size = 0

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        fingerprint = corpus_fingerprint(texts, vectors, self.bm25_settings)
        self.name = collection_name(self.settings.collection_prefix, fingerprint)
        with self._talking("ingest the chunks"):
            if not self.client.collections.exists(self.name):
                self.client.collections.create(self.name, **collection_schema(self.bm25_settings))
            self.collection = self.client.collections.get(self.name)
            if self._count() != len(texts):  # new, or an earlier ingestion stopped part way: upsert every chunk
                self._insert(fingerprint, texts, vectors)
        self._size = len(texts)

    def _insert(self, fingerprint: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        from weaviate.classes.data import DataObject

        for start in range(0, len(texts), INGEST_BATCH):
            objects = [DataObject(properties={TEXT: texts[p]}, uuid=chunk_uuid(fingerprint, p),
                                  vector=_floats(vectors[p]))
                     for p in range(start, min(start + INGEST_BATCH, len(texts)))]
            result = self.collection.data.insert_many(objects)
            if result.errors:
                first = next(iter(result.errors.values()))
                raise DataError(f"{self.where}: {len(result.errors)} chunks were not stored in {self.name} "
                                f"({getattr(first, 'message', first)})")

    def _count(self) -> int:
        return int(self.collection.aggregate.over_all(total_count=True).total_count or 0)

    def bm25(self, query: str, limit: int) -> Hits:
        if not query.strip() or not self._size:
            return Hits.empty()
        found = self.ask(bm25_query(query, limit))
        return Hits(found.ids[found.scores > 0], found.scores[found.scores > 0])

    def dense(self, vector: np.ndarray, limit: int) -> Hits:
        if not self._size:
            return Hits.empty()
        return self.ask(dense_query(vector, limit))

    def hybrid(self, query: str, vector: np.ndarray, alpha: float, fusion: str, limit: int) -> Hits:
        """Weaviate's own fusion of its two lists (each of them max(100, limit) long)."""
        return self.ask(hybrid_query(query, vector, alpha, fusion, limit))

    def ask(self, query: Query) -> Hits:
        from weaviate.classes.query import MetadataQuery

        metadata = MetadataQuery(distance=True) if query.search == "near_vector" else MetadataQuery(score=True)
        with self._talking(f"{query.search} query"):
            result = getattr(self.collection.query, query.search)(
                **query.arguments, return_metadata=metadata, return_properties=[])
        return result_hits(result.objects, query.search)

    def __len__(self) -> int:
        return self._size

    @contextmanager
    def _talking(self, what: str) -> Iterator[None]:
        """A client error (a server gone away, a refused request) as one line."""
        try:
            yield
        except self._errors as exc:
            raise ConfigError(f"{self.where}: cannot {what} ({first_line(exc)})") from None


def collection_schema(bm25: Bm25Config) -> dict[str, object]:
    """collections.create's arguments: one text property tokenised as Weaviate words, no vectorizer (tuner brings
    the vectors), an exact (flat) cosine index so dense hits equal the embedded backend's, and the BM25 settings."""
    from weaviate.classes.config import Configure, DataType, Property, StopwordsPreset, Tokenization, VectorDistances

    return {
        "properties": [Property(name=TEXT, data_type=DataType.TEXT, tokenization=Tokenization.WORD)],
        "vector_config": Configure.Vectors.self_provided(
            vector_index_config=Configure.VectorIndex.flat(distance_metric=VectorDistances.COSINE)),
        "inverted_index_config": Configure.inverted_index(
            bm25_k1=bm25.k1, bm25_b=bm25.b,
            stopwords_preset=StopwordsPreset.EN if bm25.stopwords == "en" else StopwordsPreset.NONE),
    }


def result_hits(objects, search: str) -> Hits:
    """Weaviate's objects as chunk positions and scores: BM25 and hybrid scores as they are, a vector hit's score
    1 - cosine distance (what the embedded backend returns)."""
    if not objects:
        return Hits.empty()
    ids = np.array([chunk_position(o.uuid) for o in objects], dtype=np.int64)
    if search == "near_vector":
        scores = 1.0 - np.array([o.metadata.distance for o in objects], dtype=np.float64)
    else:
        scores = np.array([o.metadata.score for o in objects], dtype=np.float64)
    return Hits(ids, scores)

