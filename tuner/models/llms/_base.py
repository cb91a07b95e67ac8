"""LLM contract: chat in, text out (optionally JSON matching a schema), plus a yes-probability for reranking.

Backends implement `_chat` and may override `yes_probability` with something better than reading the text
(llama.cpp reads the next-token distribution). Everything above this contract — DSPy, RAGAS, the LLM
reranker, the disk cache and cost accounting — works the same for every backend.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any

from tuner.errors import LLMError

Messages = list[dict[str, str]]


class PromptTooLong(LLMError):
    """One prompt does not fit the model's context window: that sample's failure, not the model's."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: first generated token's alternatives, token -> logprob (when the backend reports them)
    top_logprobs: dict[str, float] = field(default_factory=dict)
    #: a yes-probability read off the sampled text (1, 0, or nan when it says neither yes nor no): why the
    #: log-probabilities could not give it (NO_LOGPROBS, ...); "" when they did
    from_text: str = ""
    #: of the prompt tokens, those the model computed (the rest resumed a prefix it kept); None: it does not say
    evaluated_tokens: int | None = None


#: why a yes-probability was read off the sampled text, as a note completes "the judge NAME ..."
NO_LOGPROBS = "gives no log-probabilities"
NO_YES_NO = "gives log-probabilities with neither 'yes' nor 'no' among its top tokens"
NOT_NUMBERS = "gives log-probabilities that are not numbers"


def short_name(name: str) -> str:
    """A model's cache name as people read it: a GGUF's file name without its fingerprint and decoding
    ("gguf:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf:1d96…:fast" -> "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"); any
    other name as it is."""
    kind, _, rest = name.partition(":")
    return rest.split(":")[0] if kind == "gguf" and rest else name


def estimate_tokens(text: str) -> int:
    """A generous estimate without a tokenizer: 3 characters a token (English runs nearer 4)."""
    return len(text) // 3 + 1


class LLM(ABC):
    #: the model's identity in cache keys. The rule: every setting that can change a token of a reply is part of
    #: it (the weights: a GGUF's fingerprint, or endpoint + model name; llama.cpp's decoding), and nothing else
    #: (n_ctx and timeouts decide whether a reply comes, not what it says; the per-call settings, max_tokens,
    #: temperature, seed and schema, are in each call's own key). A backend setting that changes tokens (a GPU
    #: offload with other kernels, log-probabilities asked for) joins the name when it is added.
    name: str
    #: tokens a prompt and its completion may take together; None: unknown (an endpoint refuses what exceeds it)
    context_window: int | None = None

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in this model's vocabulary; without a tokenizer, `estimate_tokens`."""
        return estimate_tokens(text)

    def chat(self, messages: Messages, *, max_tokens: int = 384, temperature: float = 0.0, seed: int = 0,
             json_schema: dict[str, Any] | None = None) -> Completion:
        """Complete a conversation; with `json_schema` the reply is constrained to JSON of that shape."""
        return self._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                          json_schema=json_schema)

    @abstractmethod
    def _chat(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int,
              json_schema: dict[str, Any] | None) -> Completion:
        ...

    def yes_probability(self, messages: Messages, reuse_prefix: bool = False) -> Completion:
        """P(the answer is yes) as `text`, from one generated token; 1/0 read off the text (`from_text` says why)
        when the logprobs reported cannot give it, and nan when the text says neither yes nor no. `reuse_prefix`:
        the prompt may resume a saved prefix (a judge's verdicts on one question's contexts share it); the reranker
        evaluates each prompt whole, so a confidence never depends on the calls before it."""
        completion = self._chat(messages, max_tokens=1, temperature=0.0, seed=0, json_schema=None)
        top = completion.top_logprobs
        if not top:
            why = NO_LOGPROBS
        elif not all(isinstance(lp, (int, float)) and not isinstance(lp, bool) and lp <= 0  # NaN fails it too
                     for lp in top.values()):
            why = NOT_NUMBERS
        elif (probability := yes_share(top)) is None:
            why = NO_YES_NO
        else:
            return replace(completion, text=repr(probability), top_logprobs={})
        said = re.match(r"\s*(yes|no)\b", completion.text, re.I)
        probability = float("nan") if said is None else float(said.group(1).lower() == "yes")
        return replace(completion, text=repr(probability), top_logprobs={}, from_text=why)

    def unreachable(self) -> str | None:
        """Why this model cannot answer now, told without spending a token (an endpoint nothing listens at); None
        when, as far as that can tell, it can."""
        return None

    def close(self) -> None:
        """Release the model (memory, connections)."""


def yes_share(top_logprobs: dict[str, float]) -> float | None:
    """Probability mass on 'yes' among the yes/no tokens of one position; None if neither appears."""
    yes = sum(math.exp(lp) for token, lp in top_logprobs.items() if token.strip().lower() == "yes")
    no = sum(math.exp(lp) for token, lp in top_logprobs.items() if token.strip().lower() == "no")
    return None if yes + no == 0 else yes / (yes + no)
