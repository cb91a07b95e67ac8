"""In-process llama.cpp: a GGUF file on the CPU, loaded once per process and shared by every role."""

from __future__ import annotations

import atexit
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.config import NO_DRAFT_MODEL
from tuner.cost import current_question
from tuner.env import usable_cores
from tuner.errors import first_line
from tuner.models.llms._base import LLM, NO_YES_NO, Completion, LLMError, Messages, PromptTooLong
from tuner.models.llms._llama_decoding import (
    STATE_BUDGET_MIB,
    ModelDraft,
    PrefixStates,
    PromptLookup,
    common_prefix,
    fast_llama,
)
from tuner.models.llms._memory import RESIDENT, NotGGUF, footprint, prefix_budget


@dataclass(frozen=True)
class CallProfile:
    """Where one call's time went, from llama.cpp's own counters (bench/eval.py --profile)."""

    kind: str  # the JSON schema's title (a RAGAS prompt), or "free text"
    prompt_tokens: int
    evaluated: int  # prompt tokens computed; the rest reused the KV cache of the previous call's prefix
    completion_tokens: int
    prompt_seconds: float
    decode_seconds: float
    wall_seconds: float  # the rest of it: sampling, grammar, detokenising, Python

    @property
    def other_seconds(self) -> float:
        return max(0.0, self.wall_seconds - self.prompt_seconds - self.decode_seconds)


class LlamaCppLLM(LLM):
    #: set to a list to collect a CallProfile per chat call (profiling costs two C calls per call)
    profile: list[CallProfile] | None = None
    #: set to a list to collect every prompt's tokens (bench/prefix.py counts the study's unique prefix tokens)
    prompts: list[np.ndarray] | None = None

    def __init__(self, path: Path, n_ctx: int = 4096, n_threads: int | None = None, decoding: str = "fast",
                 prefix_memory: int = STATE_BUDGET_MIB, speculative: str = "none"):
        try:
            import llama_cpp
        except ImportError:
            raise LLMError("backend llama-cpp needs llama-cpp-python: pip install 'rag-tuner[llm]'") from None
        path = Path(path)
        if not path.is_file():
            raise LLMError(f"{path}: GGUF file not found")
        self._llama_cpp = llama_cpp
        self.path = path
        # the cache identity of this model (and of how it decodes: see _llama_decoding)
        self.name = f"gguf:{path.name}:{fingerprint(path)}" + ("" if decoding == "plain" else f":{decoding}")
        self._settings = {"n_ctx": n_ctx, "n_threads": n_threads or usable_cores(), "decoding": decoding}
        self._prefix_budget = prefix_budget(decoding, prefix_memory)
        # free-text answers drafted from their own prompt or by a smaller model (fast decoding; not part of the cache
        # identity: it sets the pace, as prefix_memory does)
        drafts = decoding == "fast" and speculative != "none"
        self._draft: PromptLookup | ModelDraft | None = PromptLookup() if drafts and speculative == "prompt-lookup" \
            else None
        self._drafter = Path(speculative) if drafts and speculative not in NO_DRAFT_MODEL else None
        self.context_window = n_ctx
        try:
            self.footprint = footprint(path, n_ctx, decoding, prefix_memory)
            if self._drafter is not None:
                self.footprint += footprint(self._drafter, n_ctx, "plain")
        except NotGGUF as exc:
            raise LLMError(f"{exc}; is the file complete? `tuner models verify` checks named models") from None
        except FileNotFoundError as exc:
            raise LLMError(f"{exc.filename}: GGUF file not found (speculative: the draft model)") from None
        self._llama: Any = None
        self._model  # noqa: B018  (loaded now: a file that is no GGUF model is told before any work)
        # free the model while the interpreter is intact: Llama.__del__ at shutdown prints a traceback
        atexit.register(self.close)

    @property
    def _model(self) -> Any:
        """The loaded model: loaded again if it was unloaded to make room for another (RESIDENT)."""
        if self._llama is None:
            self._load()
        RESIDENT.used(id(self), self.footprint, self._unload, self.path.name)
        return self._llama

    def _load(self) -> None:
        RESIDENT.make_room(self.footprint, self.path.name)
        llama_cpp, decoding = self._llama_cpp, self._settings["decoding"]
        self._states = PrefixStates(llama_cpp, self._prefix_budget) if decoding == "fast" else None
        model_class = fast_llama(llama_cpp) if decoding == "fast" else llama_cpp.Llama
        try:
            self._llama = model_class(model_path=str(self.path), n_ctx=self._settings["n_ctx"],
                                      n_threads=self._settings["n_threads"], verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"{self.path}: cannot load as a GGUF model ({first_line(exc)}); "
                           "is the file complete? `tuner models verify` checks named models") from None
        if self._drafter is not None:
            self._draft = self._draft_model(self._drafter)
        template = self._llama.metadata.get("tokenizer.chat_template")
        self._formatter = None
        if template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            vocab = self._llama
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=vocab.detokenize([vocab.token_eos()]).decode("utf-8", "ignore"),
                bos_token=vocab.detokenize([vocab.token_bos()]).decode("utf-8", "ignore"),
            )

    def _draft_model(self, path: Path) -> ModelDraft:
        """The smaller model that drafts the answers: plain decoding (within an answer, llama-cpp-python resumes
        its previous step), and the same vocabulary, or its tokens would mean other words."""
        try:
            drafter = self._llama_cpp.Llama(model_path=str(path), n_ctx=self._settings["n_ctx"],
                                            n_threads=self._settings["n_threads"], verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise LLMError(f"{path}: cannot load as a GGUF draft model ({first_line(exc)}); is the file complete?") \
                from None
        if drafter.n_vocab() != self._llama.n_vocab():
            drafter.close()
            raise LLMError(f"speculative: {path.name} cannot draft for {self.path.name}: its vocabulary has "
                           f"{drafter.n_vocab():,} tokens, not {self._llama.n_vocab():,} (a smaller model of the "
                           "same family drafts: qwen2.5-0.5b for qwen2.5-1.5b)")
        return ModelDraft(drafter)

    def _unload(self) -> None:
        if self._llama is not None:
            self._llama.close()
            self._llama = self._states = None
        if isinstance(self._draft, ModelDraft):
            self._draft.close()
            self._draft = None

    def count_tokens(self, text: str) -> int:
        return len(self._model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _chat(self, messages: Messages, *, max_tokens: int, temperature: float, seed: int,
              json_schema: dict[str, Any] | None) -> Completion:
        response_format = None if json_schema is None else {"type": "json_object", "schema": json_schema}
        started = time.perf_counter()
        if self.profile is not None:
            self._llama_cpp.llama_perf_context_reset(self._model.ctx)
        tokens = self._tokens(messages) if self._formatter is not None else None
        evaluated = None if tokens is None else self._resume(tokens)
        model = self._model
        model.draft_model = self._draft if json_schema is None else None  # a JSON reply copies no passage
        try:
            reply = model.create_chat_completion(
                messages=messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                response_format=response_format,
            )
        except ValueError as exc:  # prompt longer than n_ctx
            raise PromptTooLong(f"{self.path.name}: {first_line(exc)} (raise generator/judge n_ctx)") from None
        finally:
            model.draft_model = None
        if tokens is not None:
            self._remember(tokens)
        usage = reply.get("usage") or {}
        if self.profile is not None:
            perf = self._llama_cpp.llama_perf_context(self._model.ctx)
            self.profile.append(CallProfile(
                (json_schema or {}).get("title", "free text"), usage.get("prompt_tokens", 0), perf.n_p_eval,
                usage.get("completion_tokens", 0), perf.t_p_eval_ms / 1000, perf.t_eval_ms / 1000,
                time.perf_counter() - started))
        return Completion(reply["choices"][0]["message"]["content"] or "", usage.get("prompt_tokens", 0),
                          usage.get("completion_tokens", 0), evaluated_tokens=evaluated)

    def yes_probability(self, messages: Messages, reuse_prefix: bool = False) -> Completion:
        """Read P(yes) off the next-token distribution: one forward pass, no sampling."""
        if self._formatter is None:
            return super().yes_probability(messages, reuse_prefix)
        model = self._model
        tokens = self._tokens(messages)
        if len(tokens) >= model.n_ctx():
            raise PromptTooLong(f"{self.path.name}: a yes/no prompt of {len(tokens)} tokens exceeds n_ctx "
                                f"{model.n_ctx()} (raise generator/judge n_ctx)")
        if reuse_prefix and self._states is not None:
            # a judge's verdicts on one question's contexts: only each statement's own tokens are computed
            kept = len(tokens) - self._resume(tokens)
        else:
            # evaluated whole: a reranker's confidence must be a pure function of (question, passage), and a
            # prompt evaluated in two parts rounds differently (dynamic K compares confidences with a threshold)
            kept = 0
            self._note(tokens)
        model.n_tokens = kept
        model.eval(tokens[kept:].tolist())
        if reuse_prefix:
            self._remember(tokens)
        logits = np.ctypeslib.as_array(self._llama_cpp.llama_get_logits_ith(model.ctx, -1),
                                       shape=(model.n_vocab(),)).astype(np.float64)
        yes = [self._token_id(word) for word in ("yes", "Yes", " yes", " Yes")]
        no = [self._token_id(word) for word in ("no", "No", " no", " No")]
        top = logits.max()
        p_yes = float(np.exp(logits[[t for t in yes if t is not None]] - top).sum())
        p_no = float(np.exp(logits[[t for t in no if t is not None]] - top).sum())
        if not np.isfinite(p_yes + p_no):
            raise LLMError(f"{self.path.name}: the model's next-token scores are not numbers (is the file damaged? "
                           f"`tuner models verify` checks a named model)")
        if p_yes + p_no == 0:  # both far below the likeliest token: no yes/no verdict to read
            return Completion("nan", len(tokens), 0, from_text=NO_YES_NO, evaluated_tokens=len(tokens) - kept)
        return Completion(repr(p_yes / (p_yes + p_no)), len(tokens), 0, evaluated_tokens=len(tokens) - kept)

    def _tokens(self, messages: Messages) -> np.ndarray:
        prompt = self._formatter(messages=messages).prompt
        return np.array(self._model.tokenize(prompt.encode("utf-8"), add_bos=False, special=True), dtype=np.intc)

    def _note(self, tokens: np.ndarray) -> None:
        if self.prompts is not None:
            self.prompts.append(tokens)

    def _resume(self, tokens: np.ndarray) -> int:
        """Put the saved state sharing the longest prefix with `tokens` in the KV cache when it beats what the cache
        holds; llama-cpp-python's generate then evaluates only the rest. The prompt tokens left to evaluate (at
        least one: the next token's scores come from the last)."""
        self._note(tokens)
        model = self._model
        have = common_prefix(model.input_ids[:model.n_tokens], tokens)
        if self._states is not None and \
                (restored := self._states.restore(model.ctx, tokens, have, current_question())) is not None:
            model.input_ids[:len(restored)] = restored
            model.n_tokens = len(restored)
            model._requires_eval = True  # the logits are not the restored state's
            have = common_prefix(restored, tokens)
        return len(tokens) - min(have, len(tokens) - 1)

    def _remember(self, prompt: np.ndarray) -> None:
        """Save the KV state of the prompt, without the reply generated after it: a later call shares the prompt's
        prefix, never a reply (an exact repeat is the LLM cache's)."""
        if self._states is None:
            return
        model, lib = self._model, self._llama_cpp
        kept = common_prefix(model.input_ids[:model.n_tokens], prompt)
        if kept < model.n_tokens:
            lib.llama_memory_seq_rm(lib.llama_get_memory(model.ctx), 0, kept, -1)
            model.n_tokens = kept
            model._requires_eval = True
        self._states.save(model.ctx, model.input_ids[:kept], current_question())

    def _token_id(self, word: str) -> int | None:
        ids = self._model.tokenize(word.encode("utf-8"), add_bos=False, special=False)
        return ids[0] if len(ids) == 1 else None

    def close(self) -> None:
        RESIDENT.forget(id(self))
        self._unload()


def fingerprint(path: Path, span: int = 1 << 20) -> str:
    """What tells two GGUF files apart in a moment: the header (architecture, name, quantisation, vocabulary) and
    the last tensor bytes, with the size. Two models of the same file name and size no longer share cached calls."""
    digest = hashlib.sha256(str(path.stat().st_size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(span))
        handle.seek(max(0, path.stat().st_size - span))
        digest.update(handle.read(span))
    return digest.hexdigest()[:16]

