"""RAGAS collections metrics on tuner's judge LLM and embedder, one question and one metric at a time.

RAGAS asks its LLM for a pydantic `response_model`; `JudgeLLM` turns that into a JSON-schema-constrained
call through the cached LLM contract, re-asks on unparsable output, and finally raises `JudgeOutputError`,
which the scorer records as a counted failure — never a crash, never a silent 0.

An empty list where RAGAS needs items (no statement extracted from a non-empty answer, no verdict for the
statements, no classification of the reference) is no free pass: RAGAS would return NaN and the question
would drop out of the mean. The judge is re-asked, sampled, with `minItems: 1` in the schema; what is still
empty is an `EmptyJudgement`, scored as unsupported (0) and counted (`evaluation.empty_judgement`). The first
ask keeps RAGAS's own schema, so cached verdicts stay valid and only empty ones cost a re-ask.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms.base import InstructorBaseRagasLLM

from tuner.config import EvaluationConfig
from tuner.evaluation.judge.cut import judge_blend, judge_cut, setting_name
from tuner.metrics import REGISTRY, JudgeOutputError, JudgeTools
from tuner.models.embedders import Embedder
from tuner.models.llms import LLM, PromptTooLong
from tuner.prompts.programs import is_refusal
from tuner.text import json_candidates

Model = TypeVar("Model", bound=BaseModel)

class EmptyJudgement(JudgeOutputError):
    """The judge kept answering an empty list where items were due, even after re-asking."""


def empty_lists(reply: BaseModel) -> list[str]:
    """The reply's list fields that came back empty."""
    return [name for name, value in reply if isinstance(value, list) and not value]


def require_items(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with `minItems: 1` on its top-level lists (the grammar then cannot close an empty one)."""
    properties = {name: {**spec, "minItems": max(1, spec.get("minItems", 0))} if spec.get("type") == "array"
                  else spec for name, spec in schema.get("properties", {}).items()}
    return {**schema, "properties": properties}


class JudgeLLM(InstructorBaseRagasLLM):
    def __init__(self, llm: LLM, retries: int, max_tokens: int):
        self.llm = llm
        self.retries = retries
        self.max_tokens = max_tokens
        #: 0: the study's own verdicts (greedy first); n > 0: every call sampled with seeds of round n (noise)
        self.sample_round = 0
        #: False: an empty list is re-asked and finally raises EmptyJudgement (see the module's docstring)
        self.empty_ok = True
        #: the parsed replies of the current sample, in order (prompt compilation reads the verdicts from them)
        self.replies: list[BaseModel] = []
        self._asked: Counter[str] = Counter()

    def new_sample(self, empty_ok: bool = True) -> None:
        """Forget which prompts were asked: called before each (question, metric)."""
        self._asked.clear()
        self.replies = []
        self.empty_ok = empty_ok

    def generate(self, prompt: str, response_model: type[Model]) -> Model:
        # A prompt asked again within one sample (answer_relevancy's strictness) must give a new sample:
        # later occurrences sample with their own seed, so they stay different and still cacheable.
        occurrence = self._asked[prompt]
        self._asked[prompt] += 1
        schema = response_model.model_json_schema()
        messages = [{"role": "user", "content": prompt}]
        problem, budget, error = "", self.max_tokens, JudgeOutputError
        for attempt in range(self.retries + 1):
            sampled = occurrence > 0 or attempt > 0 or self.sample_round > 0
            completion = self.llm.chat(messages, max_tokens=budget, temperature=0.7 if sampled else 0.0,
                                       seed=self.sample_round * 1000 + occurrence * 100 + attempt,
                                       json_schema=schema)
            try:
                reply = parse_reply(completion.text, response_model)
            except JudgeOutputError as exc:
                problem, error = str(exc), JudgeOutputError
                if completion.completion_tokens >= budget:  # cut off mid-JSON: re-asking needs more room
                    budget *= 2
                    problem += f" (reply cut at {completion.completion_tokens} tokens)"
                continue
            empty = [] if self.empty_ok else empty_lists(reply)
            if not empty:
                self.replies.append(reply)
                return reply
            problem, error = f"empty {', '.join(empty)} list", EmptyJudgement
            schema = require_items(schema)
        raise error(f"{response_model.__name__} unparsable after {self.retries + 1} tries: {problem}")

    async def agenerate(self, prompt: str, response_model: type[Model]) -> Model:
        return self.generate(prompt, response_model)


def parse_reply(text: str, response_model: type[Model]) -> Model:
    """The reply as `response_model`, tolerating prose or code fences around one JSON object."""
    problem = "empty reply" if not text.strip() else "no JSON object"
    for candidate in json_candidates(text):
        try:
            return response_model.model_validate_json(candidate)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
    raise JudgeOutputError(f"{problem} in {text[:80]!r}")


class JudgeEmbeddings(BaseRagasEmbedding):
    """The project's embedder, as RAGAS wants it (answer relevancy): no second embedding model."""

    def __init__(self, embedder: Embedder):
        super().__init__()
        self.embedder = embedder

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_texts([text])[0]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return self.embedder.encode(list(texts)).tolist()

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return self.embed_texts(texts)


@dataclass(frozen=True)
class Outcome:
    value: float | None  # None: not scored (see `failure`, or skipped)
    #: nan | unparsable | no_answer | no_contexts | no_reference | error (unscored); empty (scored 0 by the rule);
    #: refusal
    #: (unscored here; rag_eval's refusal rule may score it 0)
    failure: str | None = None
    detail: str = ""


class RagasScorer:
    def __init__(self, judge: LLM, embedder: Embedder, settings: EvaluationConfig, max_tokens: int):
        self.judge = JudgeLLM(judge, settings.retries, max_tokens)
        self.empty_judgement = settings.empty_judgement
        self.tools = JudgeTools(self.judge, JudgeEmbeddings(embedder), settings,
                                judge_cut(settings, judge.name, setting_name(settings)).value,
                                judge_blend(settings, judge.name))
        self._scorers: dict[str, Any] = {}

    def scorer(self, metric: str) -> Any:
        """The metric's scorer, built from the registry on first use."""
        if metric not in self._scorers:
            self._scorers[metric] = REGISTRY[metric].build(self.tools)
        return self._scorers[metric]

    def score(self, metric: str, question: str, answer: str, contexts: list[str], reference: str | None) -> Outcome:
        """One metric on one sample; inputs RAGAS cannot take are settled here, before it sees them."""
        spec = REGISTRY[metric]
        if spec.answer_metric and not answer.strip():
            return Outcome(None, "no_answer", "empty answer")
        if "reference" in spec.needs and not (reference or "").strip():
            return Outcome(None, "no_reference", "the question has no reference answer (none given, or unanswerable)")
        if "contexts" in spec.needs and not contexts:
            if spec.no_contexts is None:
                return Outcome(None, "no_contexts", "nothing retrieved to be faithful to")
            return Outcome(spec.no_contexts, None, "nothing retrieved")  # an empty context recalls nothing
        # a refusal may truly hold no statement: it stays a refusal, never an unsupported answer
        refusal = spec.answer_metric and is_refusal(answer)
        self.judge.new_sample(empty_ok=refusal or self.empty_judgement == "exclude")
        try:
            result = asyncio.run(self.scorer(metric).ascore(**spec.inputs(question, answer, contexts, reference)))
        except EmptyJudgement as exc:
            return Outcome(0.0, "empty", f"{exc}: scored as unsupported")
        except PromptTooLong as exc:  # this sample's contexts, not the model: the others are still judged
            return Outcome(None, "too_long", str(exc))
        except JudgeOutputError as exc:
            return Outcome(None, "unparsable", str(exc))
        except (ValueError, TypeError, KeyError, json.JSONDecodeError) as exc:
            if not spec.judged:  # plain code of ours or the user's: a bug to fix, not a question that failed
                raise
            return Outcome(None, "error", f"{type(exc).__name__}: {exc}")
        value = getattr(result, "value", result)  # a RAGAS result, or a computed metric's float
        if value is None or not isinstance(value, (int, float)) or math.isnan(value):
            if refusal:
                return Outcome(None, "refusal", "the answer declines to answer: nothing to judge")
            return Outcome(None, "nan", "the judge extracted nothing to score")
        if value < spec.low or (spec.high is not None and value > spec.high):  # a mean over it would be no score
            return Outcome(None, "out_of_range", f"{metric} gave {value:g}, outside its declared range {spec.low:g} "
                                                 f"to {'∞' if spec.high is None else f'{spec.high:g}'}")
        return Outcome(float(value))
