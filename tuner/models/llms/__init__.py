"""LLM backends behind one contract (`LLM`): in-process llama.cpp and OpenAI-compatible endpoints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.config import NO_DRAFT_MODEL, EndpointConfig, LlamaCppConfig, LLMConfig
from tuner.models.llms._base import (
    LLM,
    Completion,
    LLMError,
    Messages,
    PromptTooLong,
    estimate_tokens,
    short_name,
    yes_share,
)
from tuner.models.llms._cached import CachedLLM

__all__ = ["LLM", "Completion", "LLMError", "Messages", "PromptTooLong", "CachedLLM", "estimate_tokens", "make_llm",
           "short_name", "yes_share"]

_loaded: dict[tuple, LLM] = {}


def _llama_cpp(config: LlamaCppConfig) -> tuple[tuple, Callable[[], LLM]]:
    from tuner.models.llms._llama_cpp import LlamaCppLLM
    from tuner.models.registry import resolve_gguf

    path = resolve_gguf(config.model, config.path).resolve()
    speculative = config.speculative if config.speculative in NO_DRAFT_MODEL else \
        str(resolve_gguf(config.speculative, None).resolve())  # a draft model: named, or its GGUF file
    settings = (config.n_ctx, config.n_threads, config.decoding, config.prefix_memory, speculative)
    return (str(path), *settings), lambda: LlamaCppLLM(path, *settings)


def _endpoint(config: EndpointConfig) -> tuple[tuple, Callable[[], LLM]]:
    from tuner.models.llms._openai import OpenAICompatibleLLM

    return (config.base_url, config.model, config.api_key_env), \
        lambda: OpenAICompatibleLLM(config.base_url or "", config.model, config.api_key_env, config.timeout)


#: backend -> (what makes two configs one loaded model, how to load it); a new backend is a class in config.py
#: and an entry here
BACKENDS: dict[str, Callable[[Any], tuple[tuple, Callable[[], LLM]]]] = {
    "llama-cpp": _llama_cpp,
    "openai-compatible": _endpoint,
}


def make_llm(config: LLMConfig) -> LLM:
    """The backend a config names; a model is loaded once per process even when generator and judge share it."""
    key, load = BACKENDS[config.backend](config)
    key = (config.backend, *key)
    if key not in _loaded:
        _loaded[key] = load()
    return _loaded[key]
