"""The metric registry: every fact about an answer metric in one `MetricSpec`, every table derived from it.

A metric scores one question from its answer, contexts and reference. A judged metric asks the judge LLM (the
RAGAS metrics); a computed one is plain code and costs no call. To add one, write its spec here (and, for a
computed metric, its function in a module of this package): config validation, the scorer, the judge check,
compile's budget, the refusal rule and the report's stage order all read this table.

This package is a leaf (config imports it to validate `evaluation.metrics`): facts, factories and computed
metrics' functions of text only. RAGAS is imported when a scorer is built, never at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tuner.evaluation.metrics._errors import JudgeOutputError  # noqa: F401  (the scorer catches it from here)

#: what a metric may need besides the question -> the keyword its scorer takes it as (RAGAS's names)
INPUTS = {"answer": "response", "contexts": "retrieved_contexts", "reference": "reference"}


@dataclass(frozen=True)
class JudgeTools:
    """What a scorer is built from: the judge (a RAGAS-facing LLM), the project's embedder as RAGAS wants it and
    the evaluation settings."""
    llm: Any
    embeddings: Any
    settings: Any


class Computed:
    """A computed metric's scorer: `function(**inputs) -> float | None`, awaited like a RAGAS metric."""

    def __init__(self, function: Callable[..., float | None]):
        self.function = function

    async def ascore(self, **inputs: Any) -> float | None:
        return self.function(**inputs)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    #: inputs besides the question, from INPUTS; a metric needing the answer is one a prompt changes
    needs: tuple[str, ...]
    #: builds the scorer: an object with `async ascore(user_input=..., <INPUTS of needs>)` returning a float or a
    #: result with `.value`
    build: Callable[[JudgeTools], Any]
    description: str
    judged: bool = True  # False: computed, no judge call, nothing for the judge check to check
    #: judge calls one score costs, roughly (compile's budget)
    calls: int = 1
    #: tokens the judge's largest prompt holds besides the case's own texts (instructions, few-shot examples)
    template_tokens: int = 0
    #: the judge-check case kinds that test this metric (judge_check.KINDS)
    check_kinds: tuple[str, ...] = ()
    #: the score when nothing was retrieved; None: the question is not scored ("nothing to be faithful to")
    no_contexts: float | None = 0.0
    #: scored when a config names no metrics; a new metric is opt-in, so existing configs score what they did
    default: bool = True

    @property
    def answer_metric(self) -> bool:
        return "answer" in self.needs

    def inputs(self, question: str, answer: str, contexts: list[str], reference: str | None) -> dict[str, Any]:
        given = {"answer": answer, "contexts": contexts, "reference": reference}
        return {"user_input": question, **{INPUTS[need]: given[need] for need in self.needs}}


def _faithfulness(tools: JudgeTools) -> Any:
    if tools.settings.verdicts == "graded":
        from tuner.evaluation.metrics.graded import GradedFaithfulness
        return GradedFaithfulness(tools.llm, tools.settings.statements)
    from ragas.metrics.collections import Faithfulness
    return Faithfulness(llm=tools.llm)


def _answer_relevancy(tools: JudgeTools) -> Any:
    from ragas.metrics.collections import AnswerRelevancy
    return AnswerRelevancy(llm=tools.llm, embeddings=tools.embeddings, strictness=tools.settings.strictness)


def _context_precision(tools: JudgeTools) -> Any:
    if tools.settings.verdicts == "graded":
        from tuner.evaluation.metrics.graded import GradedContextPrecision
        return GradedContextPrecision(llm=tools.llm)
    from ragas.metrics.collections import ContextPrecision
    return ContextPrecision(llm=tools.llm)


def _context_recall(tools: JudgeTools) -> Any:
    if tools.settings.verdicts == "graded":
        from tuner.evaluation.metrics.graded import GradedContextRecall
        return GradedContextRecall(llm=tools.llm)
    from ragas.metrics.collections import ContextRecall
    return ContextRecall(llm=tools.llm)


#: template_tokens: a RAGAS 0.4.3 prompt measured with the Qwen2.5 tokenizer on a five-token case (faithfulness'
#: largest call is its NLI step), rounded up
REGISTRY: dict[str, MetricSpec] = {spec.name: spec for spec in (
    MetricSpec("faithfulness", ("answer", "contexts"), _faithfulness,
               "share of the answer's statements the contexts support", calls=2, template_tokens=750,
               check_kinds=("reference", "context", "paraphrase", "other_answer", "swapped", "labelled_supported",
                            "labelled_unsupported"), no_contexts=None),
    # its strictness samples make it the dearest: one question generated per sample
    MetricSpec("answer_relevancy", ("answer",), _answer_relevancy,
               "how well questions generated from the answer match the question", calls=3, template_tokens=500,
               check_kinds=("right_question", "wrong_question")),
    MetricSpec("context_precision", ("reference", "contexts"), _context_precision,
               "whether the useful contexts rank first", template_tokens=1000,
               check_kinds=("own_contexts", "other_contexts")),
    MetricSpec("context_recall", ("reference", "contexts"), _context_recall,
               "share of the reference's claims the contexts hold", template_tokens=1350,
               check_kinds=("own_contexts", "other_contexts")),
)}

ALL_METRICS: tuple[str, ...] = tuple(REGISTRY)
MetricName = Literal[ALL_METRICS]  # type: ignore[valid-type]  # config validates names against the registry
#: metrics a prompt changes (the others depend on retrieval alone)
ANSWER_METRICS: tuple[str, ...] = tuple(name for name, spec in REGISTRY.items() if spec.answer_metric)
JUDGED_METRICS: tuple[str, ...] = tuple(name for name, spec in REGISTRY.items() if spec.judged)
DEFAULT_METRICS: tuple[str, ...] = tuple(name for name, spec in REGISTRY.items() if spec.default)
