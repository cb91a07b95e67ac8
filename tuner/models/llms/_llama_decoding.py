"""Faster decoding for in-process llama.cpp: the judge's calls cost what their new tokens cost, not more.

Measured on the RAGAS judge (bench/eval.py --profile): prompt evaluation, decoding and the JSON grammar share its
time, and each has waste that `decoding: fast` removes:

* **Prompts restart after their template.** RAGAS's prompts are long fixed instructions and examples followed by
  the sample; calls of different templates alternate, so llama.cpp's reuse of the previous call's prefix rarely
  applies. `PrefixStates` keeps the KV state of recent calls, one per template, and a call resumes from the one
  sharing the longest prefix.
* **The grammar runs only when needed.** Applying the JSON grammar to all 151k tokens of Qwen's vocabulary costs
  ~30 ms a token. `GrammarLast` samples as if unconstrained, checks that one token against the grammar and runs the
  grammar over the vocabulary only when it is refused (llama.cpp's own server samples this way). A greedy call
  picks the same token either way.
* **A loop stops.** Greedy decoding without a repetition penalty can repeat a phrase until the token cap (2 of 40
  amnesty answers did); generation stops once the same block has come three times in a row (`looping`).

Prompt-lookup drafts (verifying copied text in batches) were measured and left out: on 2 cores a batch of k tokens
costs about 37 + 22 (k - 1) ms against 37 ms a token, so drafts of 4 or 8 saved nothing on the judge's calls, and
batched products round differently, which changed greedy answers.

The first two change how tokens are computed, not which: a greedy call gives what plain decoding gives, up to the
float rounding of a prompt evaluated in two parts instead of one. The mode is still part of the model's cache identity.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

#: a loop: the same block of at most this many tokens three times in a row, spanning LOOP_SPAN tokens or more
LOOP_PERIOD = 64
LOOP_SPAN = 32
#: prompts sharing this many leading tokens share a template: the later state replaces the earlier
SAME_TEMPLATE = 96
#: memory for saved prefixes (a 1.5B model's KV state is ~28 KB a token)
STATE_BUDGET = 1 << 30


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens two sequences share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def looping(tokens: list[int]) -> bool:
    """Whether the sequence ends in the same block three times in a row (one token 32 times counts)."""
    for period in range(1, LOOP_PERIOD + 1):
        span = max(3 * period, LOOP_SPAN)
        if len(tokens) < span:
            break
        tail = tokens[-span:]
        if tail[period:] == tail[:-period]:
            return True
    return False


class PrefixStates:
    """KV states of recent calls, at most one per template, so a prompt resumes after its template's instructions
    even when calls of other templates ran in between."""

    def __init__(self, llama_cpp: Any, budget: int = STATE_BUDGET):
        self._lib = llama_cpp
        self.budget = budget
        self._saved: list[tuple[np.ndarray, ctypes.Array]] = []  # oldest first

    def save(self, ctx: Any, tokens: np.ndarray) -> None:
        """Keep the context's sequence state for `tokens` (what the KV cache holds now)."""
        if len(tokens) < SAME_TEMPLATE:
            return
        self._saved = [(old, state) for old, state in self._saved if common_prefix(old, tokens) < SAME_TEMPLATE]
        size = self._lib.llama_state_seq_get_size(ctx, 0)
        state = (ctypes.c_uint8 * size)()
        if self._lib.llama_state_seq_get_data(ctx, state, size, 0) != size:
            return
        self._saved.append((tokens.copy(), state))
        while sum(len(state) for _, state in self._saved) > self.budget:
            self._saved.pop(0)

    def restore(self, ctx: Any, tokens: np.ndarray, have: int) -> np.ndarray | None:
        """Load the saved state sharing more of `tokens` than the `have` tokens already in the KV cache; return the
        tokens the cache now holds (none if loading failed), or None when no saved state does better."""
        best, shared = None, have
        for index, (old, _) in enumerate(self._saved):
            if (n := common_prefix(old, tokens)) > shared:
                best, shared = index, n
        if best is None:
            return None
        old, state = self._saved.pop(best)
        self._saved.append((old, state))  # most recently used
        self._lib.llama_memory_clear(self._lib.llama_get_memory(ctx), True)
        if self._lib.llama_state_seq_set_data(ctx, state, len(state), 0) != len(state):
            return old[:0]
        return old


class GrammarLast:
    """A sampler for `Llama.generate`: sample unconstrained, and apply the grammar to the whole vocabulary only
    when the token drawn breaks it."""

    def __init__(self, llama_cpp: Any, free: Any, grammar: Any, rest: Any, n_vocab: int):
        self._lib = llama_cpp
        # llama-cpp-python sampler chains (they free themselves): the first try, the grammar, what follows it
        self.free, self.grammar, self.rest = free, grammar, rest
        self.n_vocab = n_vocab
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.frombuffer(self._all, dtype=np.dtype([("id", np.int32), ("logit", np.float32),
                                                               ("p", np.float32)]))

    def sample(self, ctx: Any, idx: int) -> int:
        lib = self._lib
        token = lib.llama_sampler_sample(self.free.sampler, ctx.ctx, idx)
        self._one[0] = lib.llama_token_data(token, 0.0, 0.0)
        one = lib.llama_token_data_array(self._one, 1, -1, False)
        lib.llama_sampler_apply(self.grammar.sampler, ctypes.byref(one))
        if math.isinf(self._one[0].logit):  # refused: the grammar chooses among the whole vocabulary
            logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
            self._view["id"] = np.arange(self.n_vocab, dtype=np.int32)
            self._view["logit"] = logits
            self._view["p"] = 0.0
            every = lib.llama_token_data_array(self._all, self.n_vocab, -1, False)
            lib.llama_sampler_apply(self.grammar.sampler, ctypes.byref(every))
            lib.llama_sampler_apply(self.rest.sampler, ctypes.byref(every))
            token = every.data[every.selected].id
        lib.llama_sampler_accept(self.grammar.sampler, token)
        return token


def fast_llama(llama_cpp: Any) -> type:
    """`llama_cpp.Llama` with the grammar checked last and loops stopped (see the module's docstring)."""

    class FastLlama(llama_cpp.Llama):
        def generate(self, tokens: Any, **settings: Any) -> Any:
            produced: list[int] = []
            for token in super().generate(tokens, **settings):
                produced.append(token)
                if looping(produced):
                    # end as the model ends: llama-cpp-python keeps a reply's text only at end-of-sequence or the cap
                    yield self.token_eos()
                    return
                yield token

        def _init_sampler(self, *, grammar: Any = None, **settings: Any) -> Any:
            free = super()._init_sampler(grammar=None, **settings)
            if grammar is None:
                return free
            only_grammar = llama_cpp._internals.LlamaSampler()  # the class llama.py uses
            only_grammar.add_grammar(self._model, grammar)
            rest = super()._init_sampler(grammar=None, **settings)
            return GrammarLast(llama_cpp, free, only_grammar, rest, self._n_vocab)

    return FastLlama
