"""LLM backends behind one contract (`LLM`): in-process llama.cpp and OpenAI-compatible endpoints."""

from __future__ import annotations

from tuner.config import LLMConfig
from tuner.models.llms._base import LLM, Completion, LLMError, Messages, PromptTooLong, estimate_tokens, yes_share
from tuner.models.llms._cached import CachedLLM

__all__ = ["LLM", "Completion", "LLMError", "Messages", "PromptTooLong", "CachedLLM", "estimate_tokens", "make_llm",
           "yes_share"]

_loaded: dict[tuple, LLM] = {}


def make_llm(config: LLMConfig) -> LLM:
    """The backend a config names; a GGUF is loaded once per process even when generator and judge share it."""
    if config.backend == "openai-compatible":
        from tuner.models.llms._openai import OpenAICompatibleLLM

        key: tuple = ("openai", config.base_url, config.model, config.api_key_env)
        if key not in _loaded:
            _loaded[key] = OpenAICompatibleLLM(config.base_url or "", config.model, config.api_key_env,
                                               config.timeout)
        return _loaded[key]

    from tuner.models.llms._llama_cpp import LlamaCppLLM
    from tuner.models.registry import resolve_gguf

    path = resolve_gguf(config.model, config.path).resolve()
    key = ("llama-cpp", str(path), config.n_ctx, config.n_threads, config.decoding)
    if key not in _loaded:
        _loaded[key] = LlamaCppLLM(path, config.n_ctx, config.n_threads, config.decoding)
    return _loaded[key]
