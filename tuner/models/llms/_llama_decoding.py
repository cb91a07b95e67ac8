"""Faster decoding for in-process llama.cpp: the judge's calls cost what their new tokens cost, not more.

Measured on the RAGAS judge (bench/eval.py --profile): prompt evaluation, decoding and the JSON grammar share its
time, and each has waste that `decoding: fast` removes:

* **Prompts restart after what they share.** A question's answer and its judge's verdicts each carry the
  question's passages, and a study asks for them again trial after trial (`top_k 2` is a prefix of `top_k 5`; with
  `answer_layout: passages-first`, so are the same passages under another program); RAGAS's prompts are long fixed
  instructions followed by the sample. Calls of different kinds alternate, so llama.cpp's reuse of the previous
  call's prefix rarely applies. `PrefixStates` keeps the KV states of the prompts of the questions of a study within
  a memory budget, and a call resumes from the one sharing the longest prefix.
* **The grammar runs only when needed.** Applying the JSON grammar to all 151k tokens of Qwen's vocabulary costs
  ~30 ms a token. `GrammarLast` samples as if unconstrained, checks that one token against the grammar and runs the
  grammar over the vocabulary only when it is refused (llama.cpp's own server samples this way). A greedy call
  picks the same token either way.
* **A loop stops.** Greedy decoding without a repetition penalty can repeat a phrase until the token cap (2 of 40
  amnesty answers did); generation stops once the same block has come three times in a row (`looping`).

Drafts (`speculative`: `PromptLookup` reads them off the prompt, `ModelDraft` has a smaller model write them) are
checked in batches: opt-in for free-text answers only. On 2 cores a batch of k tokens costs about 37 + 22 (k - 1) ms
against 37 ms a token, so they saved nothing on the judge's calls nor on short answers (docs/performance.md), and
batched products round differently, which can change a greedy answer.

The first two change how tokens are computed, not which: a greedy call gives what plain decoding gives, up to the
float rounding of a prompt evaluated in two parts instead of one. The mode is still part of the model's cache identity.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a loop: the same block of at most this many tokens three times in a row, spanning LOOP_SPAN tokens or more
LOOP_PERIOD = 64
LOOP_SPAN = 32
#: two saved prompts that differ only in their last this many tokens count as one: what only one could resume (a
#: statement, a program's instructions after the passages) costs less to evaluate than a second state's memory
REPLACED_TAIL = 256
#: a prompt shorter than this is not worth a saved state (it costs little to evaluate)
WORTH_SAVING = 96
#: default memory for saved prefixes, MiB (`prefix_memory`; a 1.5B model's KV state is ~28 KB a token)
STATE_BUDGET_MIB = 1024
#: a prompt-lookup draft: the most tokens it proposes, and the fewest last tokens it must find earlier in the
#: text (one or two recur everywhere: a draft that fails costs more than the step it would save)
DRAFT_MOST = 8
DRAFT_MATCH = 3


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens two sequences share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def nearly(shared: int, length: int) -> bool:
    """Whether a saved prompt sharing `shared` tokens with one of `length` tokens reaches nearly as far: all but a
    tail of at most REPLACED_TAIL tokens, and at most a quarter of a short prompt (one that shares only its template
    with another question's is not the same prompt)."""
    return shared >= WORTH_SAVING and length - shared <= min(REPLACED_TAIL, max(64, length // 4))


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


@dataclass(eq=False)  # identity: list.remove must not compare token arrays
class _Saved:
    tokens: np.ndarray
    state: ctypes.Array
    question: str  # the question being worked on when it was saved ("" when none was named)
    used: int  # the clock at its last save or resume


class PrefixStates:
    """KV states of prompts, kept per question within `budget` bytes, so a prompt resumes after the longest prefix
    any earlier call computed: the same passages or a prefix of them, the judge's contexts.

    When the budget is full, what goes suits a study that walks the same questions trial after trial: first a state
    saved outside any question, then those of the question visited most recently (the one needed again last), its
    least recently used first, and only then the current question's own. So a question's prompts always resume each
    other (its judge's verdicts share its passages), while the questions that fit keep what the next trial resumes.
    Without question names, this is least recently used."""

    def __init__(self, llama_cpp: Any, budget: int = STATE_BUDGET_MIB << 20):
        self._lib = llama_cpp
        self.budget = budget
        self._saved: list[_Saved] = []
        self._clock = 0
        self._visited: dict[str, int] = {}  # question -> the clock when its latest visit began
        self._current: str | None = None

    @property
    def held(self) -> int:
        """Bytes of saved states."""
        return sum(len(saved.state) for saved in self._saved)

    def _tick(self, question: str) -> int:
        self._clock += 1
        if question != self._current:
            self._current, self._visited[question] = question, self._clock
        return self._clock

    def save(self, ctx: Any, tokens: np.ndarray, question: str = "") -> None:
        """Keep the context's sequence state for `tokens` (what the KV cache holds now)."""
        if len(tokens) < WORTH_SAVING:
            return
        now = self._tick(question)
        shared = [common_prefix(s.tokens, tokens) for s in self._saved]
        for saved, n in zip(self._saved, shared):
            if nearly(n, len(tokens)):  # one already reaches nearly as far: a new copy adds little
                saved.used = now
                return
        self._saved = [s for s, n in zip(self._saved, shared) if not nearly(n, len(s.tokens))]
        size = self._lib.llama_state_seq_get_size(ctx, 0)
        while self.held + size > self.budget:
            if (victim := self._victim()) is None:
                return
            self._saved.remove(victim)
        state = (ctypes.c_uint8 * size)()
        if self._lib.llama_state_seq_get_data(ctx, state, size, 0) == size:
            self._saved.append(_Saved(tokens.copy(), state, question, now))

    def _victim(self) -> _Saved | None:
        """The state to drop to make room for one of the current question; None when nothing is saved."""
        if others := [s for s in self._saved if s.question != self._current]:
            # saved outside any question first; then the question visited most recently, the one a study walking the
            # questions in turn needs again last; its least recently used state first (another trial's passages)
            return min(others, key=lambda s: (bool(s.question), -self._visited.get(s.question, 0), s.used))
        return min(self._saved, key=lambda s: s.used, default=None)

    def restore(self, ctx: Any, tokens: np.ndarray, have: int, question: str = "") -> np.ndarray | None:
        """Load the saved state sharing more of `tokens` than the `have` tokens already in the KV cache; return the
        tokens the cache now holds (none if loading failed), or None when no saved state does better."""
        best, shared = None, have
        for saved in self._saved:
            if (n := common_prefix(saved.tokens, tokens)) > shared:
                best, shared = saved, n
        if best is None:
            return None
        now = self._tick(question)
        if best.question == question:  # another question's state lent its template: it stays unused by its own
            best.used = now
        self._lib.llama_memory_clear(self._lib.llama_get_memory(ctx), True)
        if self._lib.llama_state_seq_set_data(ctx, best.state, len(best.state), 0) != len(best.state):
            return best.tokens[:0]
        return best.tokens


class PromptLookup:
    """A draft for speculative decoding, read off the text so far: the tokens that followed the latest earlier
    occurrence of its last tokens (an answer copying its passages continues as they do). llama-cpp-python's
    `Llama.generate` checks the draft in one batch and keeps the part the model would have written itself."""

    def __init__(self, most: int = DRAFT_MOST, match: int = DRAFT_MATCH):
        self.most, self.match = most, match

    def __call__(self, input_ids: np.ndarray, /, **_: Any) -> np.ndarray:
        if len(input_ids) <= self.match:
            return input_ids[:0]
        tail = input_ids[-self.match:]
        windows = np.lib.stride_tricks.sliding_window_view(input_ids[:-1], self.match)
        found = np.flatnonzero((windows == tail).all(axis=1))
        if not len(found):
            return input_ids[:0]
        start = int(found[-1]) + self.match
        return input_ids[start:start + self.most].copy()


class ModelDraft:
    """A draft written ahead by a smaller model of the same vocabulary (the 0.5B for the 1.5B), greedily, as the
    answer is. Between the steps of one answer it resumes what it computed before (llama-cpp-python's `generate`
    keeps the longest common prefix), so it computes each answer's prompt once and then only the accepted tokens."""

    def __init__(self, llama: Any, most: int = DRAFT_MOST):
        self.llama, self.most = llama, most

    def __call__(self, input_ids: np.ndarray, /, **_: Any) -> np.ndarray:
        drafted: list[int] = []
        for token in self.llama.generate(input_ids.tolist(), top_k=1, temp=0.0):
            if token == self.llama.token_eos():
                break
            drafted.append(token)
            if len(drafted) == self.most:
                break
        return np.array(drafted, dtype=np.intc)

    def close(self) -> None:
        self.llama.close()


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
        def eval(self, tokens: Any) -> None:
            """A drafted step (the next token and its draft, `PromptLookup`) needs every position's logits to check
            the draft; llama-cpp-python asks for them only with `logits_all`, which would also compute them for
            every prompt token. So they are asked for here, in that step alone."""
            if self._prompt_pending or self.draft_model is None or len(tokens) == 1:
                self._prompt_pending = False  # the prompt's rest: its last token's logits, as without a draft
                return super().eval(tokens)
            self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
            self._batch.set_batch(batch=tokens, n_past=self.n_tokens, logits_all=True)
            self._ctx.decode(self._batch)
            self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
            self.n_tokens += len(tokens)
            self._requires_eval = False

        _prompt_pending = False

        def generate(self, tokens: Any, **settings: Any) -> Any:
            self._prompt_pending = True
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
