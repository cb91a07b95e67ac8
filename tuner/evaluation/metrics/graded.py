"""Graded faithfulness: per statement, the probability the judge gives to "yes, the contexts support it".

RAGAS's faithfulness is supported statements / statements, each verdict a sampled 0/1 the judge writes after a
reason. Graded, it is the same ratio as an expectation: the mean over statements of P(yes), read off one token's
log-probabilities. One token instead of a reason is cheaper, and a probability is less noisy than a draw from it.
The contexts come first in the prompt, so the verdicts of one question share a prefix that the in-process model
computes once (`reuse_prefix`); an endpoint caches such prefixes itself.

Statements are the judge's (RAGAS's statement prompt) or the answer's sentences (no call; MiniCheck found claim
decomposition unnecessary): `evaluation.statements`. An endpoint that gives no log-probabilities answers with its
sampled yes/no instead: the verdict is then 1 or 0, counted, and said once.

Imported when a scorer is built (it subclasses RAGAS's metric), never at the registry's import.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from ragas.metrics.collections import Faithfulness
from ragas.metrics.collections.faithfulness.util import NLIStatementOutput, StatementFaithfulnessAnswer
from ragas.metrics.result import MetricResult

from tuner.text import sentences

log = logging.getLogger(__name__)

#: the contexts first: every verdict of one question resumes the same prefix
VERDICT_PROMPT = "Context:\n{context}\n\nStatement: {statement}\n\nDoes the context above support the statement? " \
                 "Answer yes or no."
_CITATION = re.compile(r"\s*\[\d+(?:,\s*\d+)*\]")
_said_sampled: set[str] = set()


def verdict_messages(context: str, statement: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": VERDICT_PROMPT.format(context=context, statement=statement)}]


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences, citation marks removed (a claim, not a pointer, is what the contexts support)."""
    return [s for s in (_CITATION.sub("", sentence).strip() for sentence in sentences(answer)) if s]


class GradedFaithfulness(Faithfulness):
    def __init__(self, judge: Any, statements: str):
        """`judge`: the RAGAS-facing judge (its `llm` is tuner's LLM; its `replies` are what compile reads);
        `statements`: "judge" or "sentences"."""
        super().__init__(llm=judge)
        self.split = statements == "sentences"

    async def ascore(self, user_input: str, response: str, retrieved_contexts: list[str]) -> MetricResult:
        statements = answer_sentences(response) if self.split else \
            await self._create_statements(user_input, response)
        if not statements:
            return MetricResult(value=float("nan"))
        context = "\n".join(retrieved_contexts)  # as RAGAS joins them
        llm = self.llm.llm
        graded = []
        for statement in statements:
            reply = llm.yes_probability(verdict_messages(context, statement), reuse_prefix=True)
            if reply.from_text and llm.name not in _said_sampled:
                _said_sampled.add(llm.name)
                log.warning(f"the judge {llm.name} gives no log-probabilities: graded verdicts are its sampled "
                            f"yes/no (1 or 0)")
            graded.append((statement, float(reply.text)))
        # the verdicts as RAGAS's reply holds them, for compile's feedback on unsupported statements
        self.llm.replies.append(NLIStatementOutput(statements=[
            StatementFaithfulnessAnswer(statement=s, reason=f"P(supported) = {p:.2f}", verdict=int(p >= 0.5))
            for s, p in graded]))
        score = sum(p for _, p in graded) / len(graded)
        return MetricResult(value=score if math.isfinite(score) else float("nan"))
