"""Query strategies: what a question is searched as, written by the generator.

* none: the question itself.
* hyde: a short passage that would answer the question (HyDE, Gao et al. 2022); the dense side embeds the passage,
  BM25 searches the question and the passage.
* decomposition: 2-4 sub-questions; the question and each sub-question are retrieved with the trial's own hybrid
  settings and the ranked lists merged by reciprocal rank fusion (k 60).
* multi_query: 3 paraphrases, merged with the question's own list the same way.

A rewrite that is empty or does not parse falls back to the question alone and says so: a question is never lost
to its rewrite. Calls go through the caller's LLM, so they are cached and counted like every other call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import get_args

from tuner.config import QueryName
from tuner.models.llms import LLM

QUERY_STRATEGIES: tuple[str, ...] = get_args(QueryName)
#: reciprocal rank fusion's k for merging the lists of several searches
RRF_K = 60
#: tokens a rewrite may take: a passage of a few sentences, or a short list of questions
REWRITE_TOKENS = 160

HYDE = ("Write a short factual passage (2-3 sentences) that answers the question, as an encyclopedia would. "
        "Write only the passage.")
DECOMPOSE = ("Break the question into 2 to 4 simpler questions, each asking for one fact the answer needs, each "
             "searchable on its own; do not repeat the question. Reply with JSON.\n"
             "The form, for a question about some tower T: Question: Where was the designer of T born?\n"
             "{\"questions\": [\"Who designed T?\", \"Where was the designer of T born?\"]}")
PARAPHRASE = ("Rephrase the question in 3 different ways that keep its meaning, each one short question in other "
              "words. Reply with JSON.\n"
              "The form, for a question about some play P: Question: Who wrote P?\n"
              "{\"questions\": [\"Which author wrote the play P?\", \"P was written by whom?\", "
              "\"Who is the playwright of P?\"]}")
#: (prompt, fewest and most questions) of the strategies that write questions
WRITES_QUESTIONS = {"decomposition": (DECOMPOSE, 2, 4), "multi_query": (PARAPHRASE, 3, 3)}


@dataclass(frozen=True)
class Search:
    bm25: str  # what BM25 searches
    dense: str  # what the dense side embeds


@dataclass(frozen=True)
class Rewrite:
    """What one question is searched as: one search (none, hyde) or several merged by RRF."""

    searches: tuple[Search, ...]
    #: the rewrite was empty or did not parse: the question alone was searched
    fell_back: bool = False

    @classmethod
    def plain(cls, question: str, fell_back: bool = False) -> Rewrite:
        return cls((Search(question, question),), fell_back)


def rewrite(question: str, strategy: str, llm: LLM | None) -> Rewrite:
    if strategy == "none":
        return Rewrite.plain(question)
    if strategy not in QUERY_STRATEGIES:
        raise ValueError(f"unknown query strategy {strategy!r} ({', '.join(QUERY_STRATEGIES)})")
    if llm is None:
        raise ValueError(f"query {strategy} needs a generator LLM")
    if strategy == "hyde":
        passage = " ".join(_ask(llm, HYDE, question, None).split())
        if not passage:
            return Rewrite.plain(question, fell_back=True)
        return Rewrite((Search(f"{question} {passage}", passage),))
    prompt, fewest, most = WRITES_QUESTIONS[strategy]
    schema = {"title": "QueryRewrite", "type": "object", "required": ["questions"], "properties": {"questions": {
        "type": "array", "items": {"type": "string"}, "minItems": fewest, "maxItems": most}}}
    written = parse_questions(_ask(llm, prompt, question, schema), question)[:most]
    if not written:
        return Rewrite.plain(question, fell_back=True)
    return Rewrite(tuple(Search(q, q) for q in [question, *written]))


def parse_questions(text: str, question: str) -> list[str]:
    """The distinct questions of a {"questions": [...]} reply other than the original; [] when it does not parse."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    items = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return []
    seen = {question.strip().lower()}
    found = []
    for item in items:
        cleaned = " ".join(str(item).split()) if isinstance(item, str) else ""
        if cleaned and cleaned.lower() not in seen:
            seen.add(cleaned.lower())
            found.append(cleaned)
    return found


def _ask(llm: LLM, instruction: str, question: str, schema: dict | None) -> str:
    messages = [{"role": "system", "content": instruction}, {"role": "user", "content": f"Question: {question}"}]
    return llm.chat(messages, max_tokens=REWRITE_TOKENS, json_schema=schema).text.strip()
