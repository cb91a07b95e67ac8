"""A fact-checking classifier as its authors read it: MiniCheck's RoBERTa and DeBERTa checkers (a chunk of the
passages, the tokenizer's end token and the claim as one text; the probability of label 1), or an NLI cross-encoder
(the chunk as premise, the claim as hypothesis; the probability of the label its config names entailment). The
passages are read in chunks of `chunk_words` words and a claim's score is its best chunk's, as MiniCheck reads long
documents. Each (chunk, claim) score is read through the judge's cache and counted as a call (`cache.paid_once`).

Weights come from a local folder, or the Hub where it is reachable; a model that cannot be loaded is one line when
the checker is built, before any verdict."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.cache import paid_once
from tuner.errors import ConfigError, first_line
from tuner.metrics.checkers import Checker
from tuner.text import word_chunks


@dataclass(frozen=True)
class _Score:
    """One (chunk, claim) read: what the cache keeps and the meter counts (its tokens as prompt tokens)."""

    text: float
    prompt_tokens: int
    completion_tokens: int = 0


@dataclass(frozen=True)
class _Loaded:
    """A classifier's weights and tokenizer, loaded once per process and shared by every checker that reads it (a
    study builds one per metric per thread in flight), with the one lock its forward passes take."""

    tokenizer: Any
    model: Any
    lock: threading.Lock


#: loaded classifiers by what names them
_loaded: dict[str, _Loaded] = {}
_loading = threading.Lock()


def _load(config) -> _Loaded:
    with _loading:
        if config.classifier not in _loaded:
            _loaded[config.classifier] = _read(config)
        return _loaded[config.classifier]


def _read(config) -> _Loaded:
    """The classifier `config` names, refused in one line when it cannot be loaded or has no trained head."""
    try:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(config.classifier)
        model, loaded = AutoModelForSequenceClassification.from_pretrained(config.classifier,
                                                                           output_loading_info=True)
    except (OSError, ValueError, ImportError) as exc:
        raise ConfigError(f"checker {config.identity}: cannot load the model ({first_line(str(exc))}); give a "
                          f"folder with config.json, weights and tokenizer files, or a Hub id where the Hub is "
                          f"reachable") from None
    if loaded["missing_keys"]:  # transformers made up a head of random weights: its scores would be noise
        kind = ", ".join(getattr(model.config, "architectures", None) or ()) or "no architecture named"
        made_up = ", ".join(sorted(loaded["missing_keys"])[:2])
        raise ConfigError(f"checker {config.identity}: not a sequence classifier ({kind}): its weights hold no "
                          f"classification head ({made_up} would be random); give a fact-checking or NLI model "
                          f"trained for sequence classification")
    # one forward pass at a time, whichever checker asks: torch spreads each over the cores
    return _Loaded(tokenizer, model.eval(), threading.Lock())


class ClassifierChecker(Checker):
    def __init__(self, config):
        self.config = config
        loaded = _load(config)
        self.tokenizer, self.model, self._lock = loaded.tokenizer, loaded.model, loaded.lock
        self.label = self._supported_label()
        # the longest input the model reads (a tokenizer may not say: a model's positions do)
        self.longest = min(self.tokenizer.model_max_length, getattr(self.model.config, "max_position_embeddings",
                                                                    self.tokenizer.model_max_length))

    @property
    def name(self) -> str:
        return self.config.identity

    def _supported_label(self) -> int:
        labels = {int(i): str(name).lower() for i, name in self.model.config.id2label.items()}
        if self.config.reads == "nli":
            found = [i for i, name in labels.items() if name.startswith("entail")]
            if not found:
                advice = "use reads: minicheck for a two-label checker" if len(labels) == 2 else \
                    "name them in its config.json's id2label (entailment, neutral, contradiction as it was trained)"
                raise ConfigError(f"checker {self.config.identity} reads nli, but its labels name no entailment "
                                  f"({', '.join(labels.values())}): {advice}")
            return found[0]
        if len(labels) != 2:
            raise ConfigError(f"checker {self.config.identity} reads minicheck (two labels, 1 = supported), but "
                              f"it has {len(labels)} ({', '.join(labels.values())}): use reads: nli for an NLI model")
        return 1

    def supported(self, contexts: Sequence[str], statements: Sequence[str]) -> list[float]:
        chunks = word_chunks(list(contexts), self.config.chunk_words)
        return [max(self._score(chunk, claim) for chunk in chunks) for claim in statements]

    def _score(self, chunk: str, claim: str) -> float:
        key = ["checker", self.config.identity, self.config.reads, chunk, claim]
        return paid_once(self.cache, self.meter, key, self.config.identity,
                         lambda: self._read(chunk, claim), lambda s: {"text": s.text, "prompt_tokens": s.prompt_tokens},
                         lambda hit: _Score(hit["text"], hit["prompt_tokens"])).text

    def _read(self, chunk: str, claim: str) -> _Score:
        import torch

        if self.config.reads == "minicheck":
            joined = f"{self._fitted(chunk, claim)}{self.tokenizer.eos_token or self.tokenizer.sep_token}{claim}"
            encoded = self.tokenizer(joined, truncation=True, max_length=self.longest, return_tensors="pt")
        else:
            encoded = self.tokenizer(chunk, claim, truncation="only_first", max_length=self.longest,
                                     return_tensors="pt")
        with self._lock, torch.no_grad():
            logits = self.model(**encoded).logits[0]
        return _Score(float(torch.softmax(logits, dim=-1)[self.label]), int(encoded["input_ids"].shape[1]))

    def _fitted(self, chunk: str, claim: str) -> str:
        """The chunk cut, between tokens, to what fits beside the claim: a cut at the input's end would cut the
        claim, the thing checked."""
        room = self.longest - len(self.tokenizer(claim, add_special_tokens=False)["input_ids"]) - 4
        spans = self.tokenizer(chunk, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return chunk if len(spans) <= room else chunk[: spans[max(room, 0)][0]]
