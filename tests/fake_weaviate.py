"""A Weaviate server in this process, enough for weaviate-client v4 to talk to: REST for meta and schema, gRPC
(the client's bundled servicer) for batch inserts, counts and searches. No Weaviate server can run on our
machines; this one lets the backend's own code (schema, ingestion, queries, result mapping) run for real.

Its searches are written from Weaviate's documented behaviour, not with tuner's code: word tokens and the
collection's own stopwords/k1/b for BM25, exact cosine for vectors, and hybrid fusion as Weaviate's Go has it
(tests/weaviate_fusion.py), so that comparing it to tuner's fusion means something. Every request is recorded for
tests to inspect.
"""

from __future__ import annotations

import json
import math
import re
import threading
import uuid
from collections import Counter
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
from weaviate.proto.v1 import (
    aggregate_pb2,
    base_search_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

from tests.helpers import free_port
from tests.weaviate_fusion import weaviate_ranked, weaviate_relative_score

#: Weaviate's own "en" preset is longer; these are enough for the tests' texts
STOPWORDS = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
             "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to",
             "was", "will", "with"}
#: Weaviate's hybrid fetches this many per side (or the limit, if larger)
HYBRID_WINDOW = 100


class Collection:
    def __init__(self, schema: dict):
        self.schema = schema
        self.objects: dict[str, tuple[str, np.ndarray]] = {}  # uuid -> (text, vector)

    @property
    def bm25_settings(self) -> tuple[float, float, set[str]]:
        inverted = self.schema.get("invertedIndexConfig", {})
        bm25 = inverted.get("bm25", {})
        preset = inverted.get("stopwords", {}).get("preset", "en")
        return float(bm25.get("k1", 1.2)), float(bm25.get("b", 0.75)), STOPWORDS if preset == "en" else set()

    def tokens(self, text: str) -> list[str]:
        stop = self.bm25_settings[2]
        return [t for t in re.split(r"[^0-9a-z]+", text.lower()) if t and t not in stop]

    def bm25(self, query: str, limit: int) -> list[tuple[str, float]]:
        k1, b, _ = self.bm25_settings
        documents = {key: Counter(self.tokens(text)) for key, (text, _) in self.objects.items()}
        average = sum(sum(c.values()) for c in documents.values()) / max(len(documents), 1)
        terms = set(self.tokens(query))
        holding = {term: sum(term in c for c in documents.values()) for term in terms}
        found = []
        for key, counts in documents.items():
            length, score = sum(counts.values()), 0.0
            for term, n in holding.items():
                if counts[term]:
                    idf = math.log(1 + (len(documents) - n + 0.5) / (n + 0.5))
                    score += idf * counts[term] * (k1 + 1) / (counts[term] + k1 * (1 - b + b * length / average))
            if score > 0:
                found.append((key, score))
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))[:limit]

    def near_vector(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """(uuid, cosine distance), nearest first."""
        query = vector / np.linalg.norm(vector)
        found = [(key, float(1 - stored @ query / np.linalg.norm(stored))) for key, (_, stored) in self.objects.items()]
        return sorted(found, key=lambda hit: (hit[1], hit[0]))[:limit]

    def hybrid(self, query: str, vector: np.ndarray, alpha: float, ranked: bool, limit: int) -> list[tuple[str, float]]:
        window = max(HYBRID_WINDOW, limit)
        sets, weights = [], []
        if alpha < 1 and query:
            sets.append(self.bm25(query, window))
            weights.append(1 - alpha)
        if alpha > 0:
            sets.append([(key, 1 - distance) for key, distance in self.near_vector(vector, window)])
            weights.append(alpha)
        fused = weaviate_ranked(weights, sets) if ranked else weaviate_relative_score(weights, sets)
        return fused[:limit]


class FakeWeaviate:
    """`with FakeWeaviate() as server:` then connect to server.url with grpc_port=server.grpc_port."""

    def __init__(self, version: str = "1.32.0"):
        self.version = version
        self.collections: dict[str, Collection] = {}
        self.requests: list[tuple[str, object]] = []  # (kind, request): "rest GET /v1/meta", "search", "batch", ...
        self.http_port, self.grpc_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"

    def __enter__(self) -> FakeWeaviate:
        self._http = ThreadingHTTPServer(("127.0.0.1", self.http_port), _rest_handler(self))
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(_Servicer(self), self._grpc)
        health = grpc.unary_unary_rpc_method_handler(
            lambda request, context: health_weaviate_pb2.WeaviateHealthCheckResponse(
                status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING),
            request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
            response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString)
        self._grpc.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("grpc.health.v1.Health",
                                                                                   {"Check": health})])
        self._grpc.add_insecure_port(f"127.0.0.1:{self.grpc_port}")
        self._grpc.start()
        return self

    def __exit__(self, *_) -> None:
        self._grpc.stop(0)
        self._http.shutdown()
        self._http.server_close()

    def searches(self) -> list[search_get_pb2.SearchRequest]:
        return [request for kind, request in self.requests if kind == "search"]


def _rest_handler(server: FakeWeaviate):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_) -> None:  # quiet
            pass

        def _reply(self, status: int, body: object | None = None) -> None:
            data = json.dumps(body if body is not None else {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null") if length else None
            server.requests.append((f"rest {method} {self.path}", body))
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v1/meta":
                return self._reply(200, {"version": server.version, "modules": {}})
            if path in ("/v1/.well-known/ready", "/v1/.well-known/live"):
                return self._reply(200)
            if path == "/v1/schema" and method == "POST":
                server.collections[body["class"]] = Collection(body)
                return self._reply(200, body)
            if path.startswith("/v1/schema/"):
                name = path.rsplit("/", 1)[1]
                if name not in server.collections:
                    return self._reply(404, {"error": [{"message": f"class {name} not found"}]})
                if method == "DELETE":
                    del server.collections[name]
                    return self._reply(200)
                return self._reply(200, server.collections[name].schema)
            return self._reply(404, {"error": [{"message": f"the fake has no {method} {path}"}]})

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_DELETE(self) -> None:
            self._route("DELETE")

        def do_HEAD(self) -> None:
            self._route("HEAD")

    return Handler


def _vector(message) -> np.ndarray:
    """A vector as the client packs it: raw float32 bytes, in a Vectors list, or plain floats."""
    if getattr(message, "vector_bytes", b""):
        return np.frombuffer(message.vector_bytes, dtype="<f4").astype(np.float64)
    if len(getattr(message, "vectors", ())):
        return np.frombuffer(message.vectors[0].vector_bytes, dtype="<f4").astype(np.float64)
    return np.array(list(message.vector), dtype=np.float64)


def _uuid_bytes(key: str) -> bytes:
    return uuid.UUID(key).bytes


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, server: FakeWeaviate):
        self.server = server

    def BatchObjects(self, request, context):
        self.server.requests.append(("batch", request))
        errors = []
        for index, obj in enumerate(request.objects):
            collection = self.server.collections.get(obj.collection)
            if collection is None:
                errors.append(batch_pb2.BatchObjectsReply.BatchError(index=index, error=f"no class {obj.collection}"))
                continue
            text = obj.properties.non_ref_properties["text"] if "text" in obj.properties.non_ref_properties else ""
            collection.objects[obj.uuid] = (text, _vector(obj))
        return batch_pb2.BatchObjectsReply(errors=errors)

    def Aggregate(self, request, context):
        self.server.requests.append(("aggregate", request))
        count = len(self.server.collections[request.collection].objects)
        return aggregate_pb2.AggregateReply(single_result=aggregate_pb2.AggregateReply.Single(objects_count=count))

    def Search(self, request, context):
        self.server.requests.append(("search", request))
        collection = self.server.collections[request.collection]
        limit = request.limit or 10
        if request.HasField("bm25_search"):
            found = [(key, {"score": score}) for key, score in collection.bm25(request.bm25_search.query, limit)]
        elif request.HasField("near_vector"):
            found = [(key, {"distance": d}) for key, d in collection.near_vector(_vector(request.near_vector), limit)]
        elif request.HasField("hybrid_search"):
            hybrid = request.hybrid_search
            ranked = hybrid.fusion_type == base_search_pb2.Hybrid.FUSION_TYPE_RANKED
            alpha = hybrid.alpha_param if hybrid.use_alpha_param else hybrid.alpha
            found = [(key, {"score": score}) for key, score in
                     collection.hybrid(hybrid.query, _vector(hybrid), alpha, ranked, limit)]
        else:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "the fake answers bm25, near_vector and hybrid")
        # no properties asked for at all: Weaviate returns every non-reference one (the client's default)
        wanted = not request.HasField("properties") or request.properties.return_all_nonref_properties or \
            "text" in request.properties.non_ref_properties
        results = []
        for key, metadata in found:
            fields = {f"{name}_present": True for name in metadata}
            text = {"text": properties_pb2.Value(text_value=collection.objects[key][0])} if wanted else {}
            results.append(search_get_pb2.SearchResult(
                metadata=search_get_pb2.MetadataResult(id=key, id_as_bytes=_uuid_bytes(key), **metadata, **fields),
                properties=search_get_pb2.PropertiesResult(non_ref_props=properties_pb2.Properties(fields=text))))
        return search_get_pb2.SearchReply(results=results)
