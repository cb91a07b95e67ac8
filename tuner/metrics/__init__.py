"""The metric registry: every fact about every metric tuner reports in one `MetricSpec`, every table derived from it.

Four kinds. A *judged* metric asks the judge LLM (the RAGAS metrics) and a *computed* one is plain code; both score
one question from its answer, contexts and reference (the *scored* metrics `evaluation.metrics` names). A
*retrieval* metric reads document ids against the qrels (`retrieval_metrics.py`), a *cost* metric the trial's meter.
Each spec carries its range and direction. To add a scored metric, write its spec here (and, for a computed metric,
its function in a module of this package): config validation, the scorer, the judge check, compile's budget, the
refusal rule, the study's targets, the comparisons, the report's grouping and stage order and the stage analysis
all read this table.

This package sits on config's floor (config imports it to validate `evaluation.metrics`): facts, factories and
computed metrics' functions of text only. RAGAS is imported when a scorer is built, never at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from tuner.metrics._errors import JudgeOutputError  # noqa: F401  (the scorer catches it from here)

#: what a metric may need besides the question -> the keyword its scorer takes it as (RAGAS's names)
INPUTS = {"answer": "response", "contexts": "retrieved_contexts", "reference": "reference"}


@dataclass(frozen=True)
class JudgeTools:
    """What a scorer is built from: the judge (a RAGAS-facing LLM), the project's embedder as RAGAS wants it,
    the evaluation settings, the judge's cut (where a graded verdict reads as supported) and the coefficients its
    faithfulness is blended by (`evaluation.blend`; None: none)."""
    llm: Any
    embeddings: Any
    settings: Any
    cut: float = 0.5
    blend: Any = None


class Computed:
    """A computed metric's scorer: `function(**inputs) -> float | None`, awaited like a RAGAS metric."""

    def __init__(self, function: Callable[..., float | None]):
        self.function = function

    async def ascore(self, **inputs: Any) -> float | None:
        return self.function(**inputs)


Kind = Literal["judged", "computed", "retrieval", "cost"]


@dataclass(frozen=True)
class MetricSpec:
    name: str
    #: inputs besides the question, from INPUTS; a metric needing the answer is one a prompt changes
    needs: tuple[str, ...]
    #: builds a scored metric's scorer: an object with `async ascore(user_input=..., <INPUTS of needs>)` returning
    #: a float or a result with `.value` (None for retrieval and cost metrics, which tuner computes itself)
    build: Callable[[JudgeTools], Any] | None
    description: str
    #: judged: a judge call, checked by the judge check; computed: plain code, no call
    kind: Kind = "judged"
    #: the values it can take (high None: no upper bound); a share is 0 to 1
    low: float = 0.0
    high: float | None = 1.0
    lower_is_better: bool = False
    #: judge calls one score costs, roughly (compile's budget)
    calls: int = 1
    #: tokens the judge's largest prompt holds besides the case's own texts (instructions, few-shot examples)
    template_tokens: int = 0
    #: the judge-check case kinds that test this metric (evaluation/judge/cases.py KINDS)
    check_kinds: tuple[str, ...] = ()
    #: the score when nothing was retrieved; None: the question is not scored ("nothing to be faithful to")
    no_contexts: float | None = 0.0
    #: scored when a config names no metrics; a new metric is opt-in, so existing configs score what they did
    default: bool = True

    @property
    def judged(self) -> bool:
        return self.kind == "judged"

    @property
    def scored(self) -> bool:
        """Scored per question from its texts (judged or computed): what `evaluation.metrics` may name."""
        return self.kind in ("judged", "computed")

    @property
    def answer_metric(self) -> bool:
        return "answer" in self.needs

    @property
    def best(self) -> float | None:
        """Its best possible value; None when it has none (no bound in the better direction)."""
        return self.low if self.lower_is_better else self.high

    @property
    def worst(self) -> float | None:
        """Its worst possible value (what a refusal scores); None when it has none."""
        return self.high if self.lower_is_better else self.low

    def shortfall(self, value: float) -> float:
        """How far `value` falls short of the best, in the metric's own units (never negative)."""
        assert self.best is not None, f"{self.name} has no best value"
        return max(0.0, value - self.best if self.lower_is_better else self.best - value)

    def inputs(self, question: str, answer: str, contexts: list[str], reference: str | None) -> dict[str, Any]:
        given = {"answer": answer, "contexts": contexts, "reference": reference}
        return {"user_input": question, **{INPUTS[need]: given[need] for need in self.needs}}


def _faithfulness(tools: JudgeTools) -> Any:
    if tools.settings.verdicts == "graded":
        from tuner.metrics.graded import GradedFaithfulness
        return GradedFaithfulness(tools.llm, tools.settings, tools.cut, tools.blend)
    from ragas.metrics.collections import Faithfulness
    return Faithfulness(llm=tools.llm)


def _answer_relevancy(tools: JudgeTools) -> Any:
    from ragas.metrics.collections import AnswerRelevancy
    return AnswerRelevancy(llm=tools.llm, embeddings=tools.embeddings, strictness=tools.settings.strictness)


def _context_precision(tools: JudgeTools) -> Any:
    if tools.settings.verdicts == "graded":
        from tuner.metrics.graded import GradedContextPrecision
        return GradedContextPrecision(llm=tools.llm)
    from ragas.metrics.collections import ContextPrecision
    return ContextPrecision(llm=tools.llm)


def _context_recall(tools: JudgeTools) -> Any:
    if tools.settings.verdicts == "graded":
        from tuner.metrics.graded import GradedContextRecall
        return GradedContextRecall(tools.llm, tools.settings)
    from ragas.metrics.collections import ContextRecall
    return ContextRecall(llm=tools.llm)


def _retrieval(name: str, description: str) -> MetricSpec:
    return MetricSpec(name, (), None, description, kind="retrieval", calls=0, default=False)


def _cost(name: str, description: str) -> MetricSpec:
    return MetricSpec(name, (), None, description, kind="cost", high=None, lower_is_better=True, calls=0,
                      default=False)


#: template_tokens: a RAGAS 0.4.3 prompt measured with the Qwen2.5 tokenizer on a five-token case (faithfulness'
#: largest call is its NLI step), rounded up
REGISTRY: dict[str, MetricSpec] = {spec.name: spec for spec in (
    MetricSpec("faithfulness", ("answer", "contexts"), _faithfulness,
               "share of the answer's statements the contexts support", calls=2, template_tokens=750,
               check_kinds=("reference", "context", "paraphrase", "other_answer", "swapped", "addition",
                            "subtle_change", "one_in_four", "labelled_supported", "labelled_unsupported"),
               no_contexts=None),
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
    # by document id against the qrels, each document once at its best chunk (retrieval_metrics.py)
    _retrieval("recall@k", "share of the gold documents among the top_k ranked"),
    _retrieval("recall@1", "share of the gold documents ranked first"),
    _retrieval("recall@5", "share of the gold documents among the first 5 ranked"),
    _retrieval("recall@10", "share of the gold documents among the first 10 ranked"),
    _retrieval("precision", "share of the selected documents that are gold"),
    _retrieval("ndcg@10", "nDCG of the first 10 ranked documents"),
    _retrieval("mrr", "1 / rank of the first gold document"),
    # the pipeline's own cost (query rewriting, LLM reranking, the answer; never the judge's), as on a cold cache
    _cost("seconds_per_question", "seconds the pipeline spends on a question"),
    _cost("tokens_per_question", "LLM tokens the pipeline spends on a question"),
    _cost("context_tokens", "tokens of the contexts the generator reads"),
)}


def _of(*kinds: str) -> tuple[str, ...]:
    return tuple(name for name, spec in REGISTRY.items() if spec.kind in kinds)


#: what a study may optimise or guard: every metric
TARGETS: tuple[str, ...] = tuple(REGISTRY)
#: what `evaluation.metrics` may name: scored per question from its texts
SCORED_METRICS: tuple[str, ...] = _of("judged", "computed")
RETRIEVAL_METRICS: tuple[str, ...] = _of("retrieval")
COST_METRICS: tuple[str, ...] = _of("cost")
JUDGED_METRICS: tuple[str, ...] = _of("judged")
MetricName = Literal[SCORED_METRICS]  # type: ignore[valid-type]  # config validates names against the registry
#: metrics a prompt changes (the others depend on retrieval alone)
ANSWER_METRICS: tuple[str, ...] = tuple(name for name in SCORED_METRICS if REGISTRY[name].answer_metric)
DEFAULT_METRICS: tuple[str, ...] = tuple(name for name in SCORED_METRICS if REGISTRY[name].default)


def lower_is_better(metric: str) -> bool:
    return REGISTRY[metric].lower_is_better
