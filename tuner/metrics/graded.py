"""Graded verdicts: per statement, the probability the judge gives to "yes", not a sampled 0/1 with its reason.

RAGAS's faithfulness is supported statements / statements, each verdict a sampled 0/1 the judge writes after a
reason. Graded, it is the same ratio as an expectation: the mean over statements of P(yes), read off one token's
log-probabilities. One token instead of a reason is cheaper, and a probability is less noisy than a draw from it.
Context recall is the same with the reference's sentences as the statements, and context precision RAGAS's average
precision over P(the passage is useful) per passage.

A statement's P(supported) comes from a checker (`metrics/checkers`): the judge's own P(yes) (`JudgeVerdicts`,
below), or the kind `evaluation.checker` names. The contexts come first in a verdict's prompt, so a question's
faithfulness and recall verdicts share one prefix that the in-process model computes once (`reuse_prefix`); an
endpoint caches such prefixes itself. Precision judges each passage alone (RAGAS's definition: a passage is not
useful because another one is), after the question and reference its calls share.

Statements are the judge's (RAGAS's statement prompt) or the answer's sentences (no call; MiniCheck found claim
decomposition unnecessary): `evaluation.statements`. An endpoint that gives no log-probabilities answers with its
sampled yes/no instead: the verdict is then 1 or 0, counted, and said once.

Two settings of the verdict itself, measured on people's labels (docs/performance.md, "Judge on people's labels"):
`evaluation.verdict_contexts` reads the contexts joined (one prompt per statement) or each passage alone, the
statement's verdict the best of them (as MiniCheck and AlignScore do for long documents: a small model reading four
passages at once dilutes its attention); `evaluation.verdict_prompt` asks RAGAS-style "does the context support
the statement" or NLI-style "is every fact of the claim in the document" (a claim that states no fact, such as a
question or a remark about the passages, is supported: people do not call it a hallucination), or in a checker
LLM's own format behind an endpoint (`minicheck`: Bespoke-MiniCheck's instructions and "Document: … Claim: …";
`granite-guardian`: Granite Guardian 3.0–3.2's groundedness check, which answers whether the risk is there, so a
statement's P(supported) is its P(No)).

Imported when a scorer is built (it subclasses RAGAS's metric), never at the registry's import.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from ragas.metrics.collections import ContextPrecision, ContextRecall, Faithfulness
from ragas.metrics.collections.faithfulness.util import NLIStatementOutput, StatementFaithfulnessAnswer
from ragas.metrics.result import MetricResult

from tuner.metrics._errors import JudgeOutputError
from tuner.metrics.checkers import Checker, make_checker
from tuner.metrics.checkers._lexical import held_shares
from tuner.text import CHUNK_WORDS, CONTEXT_HEADING, number_contexts, sentences, word_chunks

log = logging.getLogger(__name__)

#: the contexts first: every verdict of one question resumes the same prefix (`evaluation.verdict_prompt`)
VERDICT_PROMPTS = {
    "support": CONTEXT_HEADING + "{context}\n\nStatement: {statement}\n\nDoes the context above support the "
               "statement? Answer yes or no.",
    "nli": "Document:\n{context}\n\nClaim: {statement}\n\nIs the claim supported by the document? Yes if every "
           "fact in it is stated in the document or follows from it, or if it states no fact (a question, a "
           "greeting, a remark about the document itself); no if it adds or changes any fact. Answer yes or no.",
    "minicheck": "Document: {context}\nClaim: {statement}",
}
#: a checker LLM's own instructions, as it was trained with them (feeding a checker another format loses its accuracy):
#: Bespoke-MiniCheck (served by Ollama or vLLM) reads this system message, then "Document: … Claim: …"
VERDICT_SYSTEM = {
    "minicheck": "Determine whether the provided claim is consistent with the corresponding document. Consistency in "
                 "this context implies that all information presented in the claim is substantiated by the document. "
                 "If not, it should be considered inconsistent. Please assess the claim's consistency with the "
                 "document by responding with either \"Yes\" or \"No\".",
}
#: Granite Guardian 3.0–3.2 (IBM's risk_name API; Ollama's granite3-guardian takes the risk as the system message):
#: the passages as a "context" turn, the statement as the assistant's, and a Yes that means the risk is there
GUARDIAN_RISK = "groundedness"
#: verdict formats whose "yes" says the statement is NOT supported
SAYS_RISK = {"granite-guardian"}
#: the question and reference first: every passage of one question resumes them
USEFUL_PROMPT = "Question: {question}\nReference answer: {reference}\n\nPassage: {passage}\n\nIs the passage useful " \
                "for arriving at the reference answer? Answer yes or no."
_CITATION = re.compile(r"\s*\[\d+(?:,\s*\d+)*\]")
_said_sampled: set[tuple[str, str]] = set()


def verdict_messages(context: str, statement: str, prompt: str = "support",
                     demos: Sequence[Any] = ()) -> list[dict[str, str]]:
    """The verdict's chat: an aligned judge's labelled demonstrations first, as earlier turns answered yes or no
    (the same for every verdict, so they stay in the shared prefix), then the contexts and the statement."""
    if prompt == "granite-guardian":  # its own turns; an aligned judge's demonstrations do not fit them
        return [{"role": "system", "content": GUARDIAN_RISK}, {"role": "context", "content": context},
                {"role": "assistant", "content": statement}]
    template = VERDICT_PROMPTS[prompt]
    system = [{"role": "system", "content": VERDICT_SYSTEM[prompt]}] if prompt in VERDICT_SYSTEM else []
    shown = [turn for demo in demos for turn in (
        {"role": "user", "content": template.format(context=demo.context, statement=demo.statement)},
        {"role": "assistant", "content": "yes" if demo.supported else "no"})]
    return [*system, *shown, {"role": "user", "content": template.format(context=context, statement=statement)}]


def useful_messages(question: str, reference: str, passage: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": USEFUL_PROMPT.format(question=question, reference=reference,
                                                              passage=passage)}]


def grade(llm: Any, messages: list[dict[str, str]]) -> float:
    """P(yes) for one verdict, resuming the question's saved prefix; a judge whose log-probabilities cannot give it
    answers with its sampled yes/no (1 or 0), said once per judge and reason. A reply that says neither is no
    verdict: the sample is unparsable, not unsupported."""
    reply = llm.yes_probability(messages, reuse_prefix=True)
    if reply.from_text and (llm.name, reply.from_text) not in _said_sampled:
        _said_sampled.add((llm.name, reply.from_text))
        log.warning(f"the judge {llm.name} {reply.from_text}: graded verdicts are its sampled yes/no (1 or 0)")
    probability = float(reply.text)
    if math.isnan(probability):
        raise JudgeOutputError("the judge's yes/no verdict said neither yes nor no")
    return probability


def mean(values: list[float]) -> MetricResult:
    score = sum(values) / len(values) if values else float("nan")
    return MetricResult(value=score if math.isfinite(score) else float("nan"))


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences, citation marks removed (a claim, not a pointer, is what the contexts support)."""
    return [s for s in (_CITATION.sub("", sentence).strip() for sentence in sentences(answer)) if s]


def supported(llm: Any, contexts: Sequence[str], statements: Sequence[str], settings: Any) -> list[float]:
    """P(the contexts support it) per statement: one verdict on the contexts joined as RAGAS joins them (or numbered
    as the answer prompt shows them), or the best verdict over the passages read one at a time, or over chunks of
    `CHUNK_WORDS` words (`settings.verdict_contexts`).
    Passage by passage, every statement of a passage runs before the next passage, so each passage's prefix is
    computed once."""
    prompt, demos = settings.verdict_prompt, settings.alignment.demos if settings.alignment else ()

    def verdict(context: str, statement: str) -> float:
        said = grade(llm, verdict_messages(context, statement, prompt, demos))
        return 1 - said if prompt in SAYS_RISK else said
    if settings.verdict_contexts in ("joined", "numbered"):
        # numbered as the answer prompt shows them: a `context-first` answer's passages are this prompt's prefix
        context = number_contexts(list(contexts)) if settings.verdict_contexts == "numbered" else "\n".join(contexts)
        return [verdict(context, s) for s in statements]
    passages = word_chunks(list(contexts), CHUNK_WORDS) if settings.verdict_contexts == "chunks" else \
        [c for c in contexts if c.strip()] or [""]
    verdicts = [[verdict(passage, s) for s in statements] for passage in passages]
    return [max(column) for column in zip(*verdicts)]


class JudgeVerdicts(Checker):
    """The judge's own P(yes) per statement under the verdict settings: what `evaluation.checker: none` means."""

    def __init__(self, llm: Any, settings: Any):
        self.llm = llm
        self.settings = settings

    @property
    def name(self) -> str:
        return self.llm.name

    def supported(self, contexts: Sequence[str], statements: Sequence[str]) -> list[float]:
        return supported(self.llm, contexts, statements, self.settings)


def checker_for(llm: Any, settings: Any) -> Checker:
    """What reads the graded verdicts of faithfulness and context recall: `settings.checker`, else the judge."""
    if settings.checker is None:
        return JudgeVerdicts(llm, settings)
    return make_checker(settings.checker, getattr(llm, "cache", None), getattr(llm, "meter", None))


def lexical_shares(contexts: Sequence[str], answer: str) -> tuple[float, float]:
    """The shares of the answer's content words, and of its numbers and names, that the passages hold (the lexical
    checker's two readings, averaged over the answer's sentences as `bench/combine.py` fitted them)."""
    sentences_ = answer_sentences(answer)
    if not sentences_:
        return 1.0, 1.0
    words, facts = (held_shares(contexts, sentences_, kind) for kind in ("words", "facts"))
    return sum(words) / len(sentences_), sum(facts) / len(sentences_)


class GradedFaithfulness(Faithfulness):
    def __init__(self, judge: Any, settings: Any, cut: float = 0.5, blend: Any = None):
        """`judge`: the RAGAS-facing judge (its `llm` is tuner's LLM; its `replies` are what compile reads);
        `settings`: the project's evaluation settings (statements, verdict_contexts, verdict_prompt); `cut`: where
        a statement's P(supported) reads as supported in those replies; `blend`: the coefficients an answer's score
        is blended with the lexical shares by (`evaluation.blend`; the model registry's `Blend`), None for none."""
        super().__init__(llm=judge)
        self.settings = settings
        self.cut = cut
        self.checker = checker_for(judge.llm, settings)
        self.blend = blend

    async def ascore(self, user_input: str, response: str, retrieved_contexts: list[str]) -> MetricResult:
        statements = answer_sentences(response) if self.settings.statements == "sentences" else \
            await self._create_statements(user_input, response)
        if not statements:
            return MetricResult(value=float("nan"))
        graded = list(zip(statements, self.checker.supported(retrieved_contexts, statements)))
        # the verdicts as RAGAS's reply holds them, for compile's feedback on unsupported statements
        self.llm.replies.append(NLIStatementOutput(statements=[
            StatementFaithfulnessAnswer(statement=s, reason=f"P(supported) = {p:.2f}", verdict=int(p >= self.cut))
            for s, p in graded]))
        score = mean([p for _, p in graded])
        if self.blend is None or not math.isfinite(score.value):
            return score
        return MetricResult(value=self.blend.apply(score.value, *lexical_shares(retrieved_contexts, response)))


class GradedContextRecall(ContextRecall):
    """The share of the reference's sentences the contexts support, each P(yes) under faithfulness' prompt (and
    prefix: a question's faithfulness verdicts computed it already)."""

    def __init__(self, judge: Any, settings: Any):
        super().__init__(llm=judge)
        self.settings = settings
        self.checker = checker_for(judge.llm, settings)

    async def ascore(self, user_input: str, retrieved_contexts: list[str], reference: str) -> MetricResult:
        return mean(self.checker.supported(retrieved_contexts, answer_sentences(reference)))


class GradedContextPrecision(ContextPrecision):
    """RAGAS's average precision over the passages in rank order, each passage's verdict P(useful)."""

    async def ascore(self, user_input: str, reference: str, retrieved_contexts: list[str]) -> MetricResult:
        useful = [grade(self.llm.llm, useful_messages(user_input, reference, passage))
                  for passage in retrieved_contexts]
        return MetricResult(value=float(self._calculate_average_precision(useful)) if useful else float("nan"))
