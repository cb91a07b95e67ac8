"""Whether the models a search space names can run here, told in one line before any trial: an unknown name, a
model not installed (and how to install it), a file that is no GGUF model, models that cannot fit in memory
together."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tuner.config import NO_DRAFT_MODEL, LLMConfig
from tuner.errors import ConfigError
from tuner.models.embedders import BUNDLED_MODELS, resolve_model_path
from tuner.models.llms._memory import NotGGUF, available, footprint, gib, read_header, room_said
from tuner.models.registry import NAMED_MODELS, locate


def gguf_of(config: LLMConfig, what: str) -> tuple[Path | None, int]:
    """The GGUF file an in-process model loads and its footprint loaded (its draft model's included), read from its
    header (None, 0 for an endpoint's model or parts assembled on first use), checked: a known name that is
    installed, or a file that is a GGUF model."""
    if config.backend != "llama-cpp":
        return None, 0
    path = _checked_gguf(config.model, config.path, what)
    size = 0 if path is None else footprint(path, config.n_ctx, config.decoding, config.prefix_memory)
    if config.speculative not in NO_DRAFT_MODEL:
        said = f"{what}'s draft model (speculative:)"
        draft = _checked_gguf(config.speculative, None, said)
        if draft is not None and path is not None and draft.stat().st_size >= path.stat().st_size:
            # a draft pays for itself only by writing ahead faster than the model checks it: a model its size or
            # larger (itself, or the 1.5B for the 0.5B) makes every answer slower, whatever it drafts
            raise ConfigError(f"{said} {config.speculative}: {_mb(draft)} is not smaller than the model it drafts "
                              f"for, {_mb(path)}; a smaller model of the same family drafts "
                              f"(qwen2.5-0.5b for qwen2.5-1.5b), or speculative: prompt-lookup needs none")
        size += 0 if draft is None else footprint(draft, config.n_ctx, "plain")
    return path, size


def _mb(path: Path) -> str:
    return f"{path.name} ({path.stat().st_size / 2**20:,.0f} MB)"


def _checked_gguf(model: str, path: Path | None, what: str) -> Path | None:
    """The GGUF file of a named model or path, refused in one line when it is missing or no GGUF model (None when
    its installed parts are assembled on first use)."""
    if path is None and not model.endswith(".gguf") and os.sep not in model:
        named = NAMED_MODELS.get(model)
        if named is None:
            raise ConfigError(f"{what} {model!r}: not a named local model ({', '.join(NAMED_MODELS)}), not a "
                              f".gguf path, and not declared under the project's generators: (an endpoint's model "
                              f"is declared there with its backend: openai-compatible and base_url)")
        located = locate(named)
        if not located.ready:
            raise ConfigError(f"{what} {model}: {located.status}")
        if located.path is None:  # the parts are installed: assembled on first use
            return None
        path = located.path
    else:
        path = Path(path or model)
    if not path.is_file():
        looked = "" if path.is_absolute() else f" (looked for {path.resolve()})"
        raise ConfigError(f"{what} {path}: GGUF file not found{looked}")
    try:
        read_header(path)
    except NotGGUF as exc:
        raise ConfigError(f"{what} {exc}") from None
    return path


def check_fit(generators: Sequence[LLMConfig], judge: LLMConfig, where: str) -> None:
    """Refuse generators that cannot be in memory beside the judge: a trial needs its generator and the judge
    loaded together (the other generators are unloaded to make room)."""
    judge_path, judge_size = gguf_of(judge, "judge")
    room = available()
    for config in generators:
        path, size = gguf_of(config, "generator")
        need = size + (judge_size if path != judge_path else 0)
        if need > room:
            beside = f" beside the judge {judge.model} ({gib(judge_size)}), {gib(need)} in all" \
                if judge_size and path != judge_path else ""
            raise ConfigError(f"{where}: generator {config.model} needs about {gib(size)} loaded"
                              f"{beside}; {room_said(room)}")


def check_embedder(name: str, what: str = "embedder") -> None:
    """A sentence-transformers model that loads offline: bundled, a local folder, or in the Hugging Face cache
    (any hub name when the Hub is allowed: HF_HUB_OFFLINE=0)."""
    if name in BUNDLED_MODELS:
        resolve_model_path(name)  # names the package to install when it is missing
        return
    path = Path(name)
    if path.exists():
        if not path.is_dir() or not any((path / f).is_file() for f in ("modules.json", "config.json")):
            raise ConfigError(f"{what} {name}: not a model folder (no modules.json or config.json in it)")
        return
    if os.environ.get("HF_HUB_OFFLINE", "0") in ("0", "false", "False", ""):
        return  # the Hub is reachable: sentence-transformers downloads it on first use
    from huggingface_hub import try_to_load_from_cache

    for repo in (name,) if "/" in name else (name, f"sentence-transformers/{name}", f"cross-encoder/{name}"):
        try:
            if isinstance(try_to_load_from_cache(repo, "config.json"), str):
                return
        except ValueError:  # not a repo id at all
            break
    raise ConfigError(f"{what} {name}: not a local folder, not bundled ({', '.join(sorted(BUNDLED_MODELS)[:1])}), "
                      f"and not in the Hugging Face cache; download it once where the Hub is reachable "
                      f"(HF_HUB_OFFLINE=0), or give the folder of a saved model")
