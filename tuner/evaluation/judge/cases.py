"""The judge check's labelled cases, built from the user's own questions: no human labels are needed, the data
vouches for some answers and rules others out (check.py measures the judge on them).

- supported (should score high): the question's reference answer; sentences copied from its gold contexts; the
  reference reworded by the generator (`paraphrase`, marked: a small model can slip while rewording).
- unsupported (should score low): another question's answer on these contexts (`other_answer`, taken from a
  question whose gold documents are disjoint); the supported answer with its numbers or names swapped. And three
  kinds modelled on the hallucinations people label in real answers (RAGTruth), which sit inside otherwise
  faithful text: the supported answer with one plausible detail the contexts do not hold added by the generator
  (`addition`), a long supported answer with one number or name changed in one sentence (`subtle_change`), and
  three sentences of the gold contexts with another question's sentence among them (`one_in_four`).
- answer relevancy: the supported answer to its own question vs to another question's; context precision and
  recall (with references): the question's own gold contexts vs another question's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.data import Dataset, Question
from tuner.errors import DataError
from tuner.evaluation.labels import Label
from tuner.metrics import REGISTRY

if TYPE_CHECKING:  # the scorer imports RAGAS: reports read saved checks without it
    pass

log = logging.getLogger(__name__)


#: kind -> (supported?, what the case is)
KINDS: dict[str, tuple[bool, str]] = {
    "reference": (True, "the question's reference answer"),
    "context": (True, "sentences copied from the question's gold contexts"),
    "paraphrase": (True, "the reference reworded by the generator (generated: may err)"),
    "other_answer": (False, "another question's answer, on these contexts"),
    "swapped": (False, "the supported answer with its numbers or names swapped"),
    "addition": (False, "the supported answer with one plausible detail its contexts do not hold, added by the "
                        "generator (generated: may err)"),
    "subtle_change": (False, "three or four sentences of the gold contexts with one number or name changed in one "
                             "of them"),
    "one_in_four": (False, "three sentences of the gold contexts with another question's sentence among them"),
    "right_question": (True, "the supported answer, asked with its own question"),
    "wrong_question": (False, "the supported answer, asked with another question"),
    "own_contexts": (True, "the question's own gold contexts"),
    "other_contexts": (False, "another question's gold contexts"),
    "labelled_supported": (True, "an answer a person labelled supported (tuner judge label)"),
    "labelled_unsupported": (False, "an answer a person labelled not supported"),
}



#: what the check before a study's first trial builds: one case per class per question, few calls
QUICK_KINDS = ("reference", "other_answer", "right_question", "wrong_question", "own_contexts", "other_contexts")



QUICK_QUESTIONS = 3



PARAPHRASE_PROMPT = ("Rewrite the answer below in other words. Keep every fact, add nothing, and reply with the "
                     "rewritten answer only.\n\nAnswer: {answer}")



ADDITION_PROMPT = ("Here is an answer:\n\n{answer}\n\nWrite one more sentence that continues it with a specific, "
                   "plausible detail (a name, a number, a date or a cause) that the answer does not state. Reply with "
                   "that sentence only.")



#: the unsupported kinds modelled on the hallucinations people label in real answers: inside faithful text
HARD_KINDS = ("addition", "subtle_change", "one_in_four")



#: the kinds the generator writes (`tuner judge check --no-paraphrase` leaves them out)
GENERATED_KINDS = ("paraphrase", "addition")



@dataclass(frozen=True)
class Case:
    metric: str
    question_id: str
    kind: str
    question: str
    answer: str
    contexts: tuple[str, ...]
    reference: str | None

    @property
    def supported(self) -> bool:
        return KINDS[self.kind][0]

    @property
    def key(self) -> str:
        return f"{self.metric}:{self.question_id}:{self.kind}"



@dataclass(frozen=True)
class Source:
    """One question the check draws on, with the texts of its gold contexts."""

    question: Question
    gold: tuple[str, ...]

    @property
    def answer(self) -> str:
        """What the data vouches for: the reference, else sentences of the gold contexts."""
        return self.question.reference or context_sentences(self.gold)



#: the passages that answer a question, as a study would show them to the judge
GoldTexts = Callable[[Question], tuple[str, ...]]



def gold_texts(dataset: Dataset, question: Question) -> tuple[str, ...]:
    """The passages that answer the question: its gold documents, or the contexts its RAGAS row came with."""
    if question.contexts:
        return question.contexts
    by_id = {d.id: d.text for d in dataset.documents}
    return tuple(by_id[i] for i in sorted(question.relevant_ids) if i in by_id)



def gold_chunks(workspace) -> GoldTexts | None:
    """A question's gold contexts as a study's are: per gold document, its chunk closest to the question (whole
    documents of thousands of words overflow a judge's window, and no trial ever shows one). None for the user's
    own system, which chunks for itself: its gold documents whole."""
    index = workspace.index
    if index is None:
        return None
    by_doc: dict[str, list[int]] = {}
    for position, chunk in enumerate(index.chunks):
        if chunk.level == 0:  # a passage of the document, not a RAPTOR summary over several
            by_doc.setdefault(chunk.doc_id, []).append(position)

    def texts(question: Question) -> tuple[str, ...]:
        if question.contexts:
            return question.contexts
        gold = [by_doc[d] for d in sorted(question.relevant_ids) if d in by_doc]
        if not gold:
            return ()
        asked = workspace.embedder.encode([question.text])[0]
        return tuple(index.chunks[max(positions, key=lambda i: float(index.vectors[i] @ asked))].text
                     for positions in gold)

    return texts



def sources(dataset: Dataset, questions: Sequence[Question], n: int, passages: GoldTexts | None = None) -> list[Source]:
    """The first `n` questions that have gold contexts and something the data vouches for; `passages` gives a
    question's gold contexts (default: whole gold documents)."""
    found = []
    for question in questions:
        gold = passages(question) if passages else gold_texts(dataset, question)
        if gold and (question.reference or context_sentences(gold)):
            found.append(Source(question, gold))
        if len(found) == n:
            break
    if len(found) < 2:
        raise DataError(f"dataset {dataset.name}: the judge check needs at least 2 questions with gold contexts "
                        f"(gold document ids, or contexts given with each question); found {len(found)}")
    return found



def partner(items: Sequence[Source], index: int) -> Source | None:
    """The next question (cyclically) that shares no gold context with this one: its answer is unsupported here."""
    own = set(items[index].gold)
    for step in range(1, len(items)):
        other = items[(index + step) % len(items)]
        if not own & set(other.gold) and other.answer.strip() != items[index].answer.strip():
            return other
    return None



def build_cases(items: Sequence[Source], metrics: Sequence[str], kinds: Sequence[str] = tuple(KINDS),
                paraphrase: Callable[[str], str] | None = None,
                add_detail: Callable[[str], str] | None = None) -> list[Case]:
    """Labelled cases for each metric, question by question; a kind the data cannot build is left out.
    `paraphrase` and `add_detail` are the generator's rewording of an answer and the sentence it adds to one."""
    cases = []
    for index, source in enumerate(items):
        other = partner(items, index)
        if other is None:
            continue
        q, gold = source.question, source.gold
        answers: dict[str, str | None] = {}
        if "faithfulness" in metrics:
            answers = {"reference": q.reference, "context": context_sentences(gold), "other_answer": other.answer,
                       "swapped": swap(source, other),
                       "paraphrase": paraphrase(q.reference) if paraphrase and q.reference and "paraphrase" in kinds
                       else None,
                       "addition": f"{source.answer.strip()} {add_detail(source.answer).strip()}"
                       if add_detail and "addition" in kinds else None,
                       "subtle_change": subtle_change(source, other), "one_in_four": one_in_four(source, other)}
        for metric in metrics:
            for kind in REGISTRY[metric].check_kinds:
                if kind not in kinds:
                    continue
                question, answer, contexts = q.text, source.answer, gold
                if metric == "faithfulness":
                    answer = answers.get(kind)  # the labelled kinds come from people (label_cases), not from here
                elif kind == "wrong_question":
                    question = other.question.text
                elif kind == "other_contexts":
                    contexts = other.gold
                if "reference" in REGISTRY[metric].needs and not q.reference:
                    continue
                if answer and answer.strip():
                    cases.append(Case(metric, q.id, kind, question, answer.strip(), tuple(contexts), q.reference))
    if not cases:
        raise DataError("the judge check could build no case: every question shares its gold contexts with "
                        "every other")
    return cases



def label_cases(labels: Iterable[Label]) -> list[Case]:
    """Faithfulness cases from human labels: the labelled answers on the contexts they were given (skips left out)."""
    said = [label for label in labels if label.supported is not None and label.answer.strip()]
    cases = [Case("faithfulness", label.question_id, "labelled_supported" if label.supported else
                  "labelled_unsupported", label.question, label.answer, label.contexts, None)
             for label in said if any(c.strip() for c in label.contexts)]
    if not said:
        raise DataError("no label says supported or not supported (only skips, or empty answers): nothing to check "
                        "the judge against")
    if not cases:
        raise DataError(f"none of the {len(said)} labelled answers has a context: a judge checks an answer against "
                        f"the contexts it was given (each label's `contexts`)")
    if len(cases) < len(said):
        log.warning(f"{len(said) - len(cases)} of {len(said)} labelled answers have no context and are left out (a "
                    f"judge checks an answer against its contexts)")
    return cases



def gold_sentences(gold: Sequence[str], limit: int) -> list[str]:
    """The first `limit` sentences of the gold contexts, in order, each whole."""
    text = " ".join(" ".join(g.split()) for g in gold)
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 3][:limit]



def subtle_change(source: Source, other: Source) -> str | None:
    """Up to four sentences of the gold contexts (three at least) with one fact changed in one of them, not the
    first: its first number
    shifted, else its first name replaced by one the contexts do not hold. None when no sentence has either."""
    sentences = gold_sentences(source.gold, 4)
    donors = [n for n in names(" ".join(other.gold)) if n not in " ".join(source.gold)]
    for i in [*range(1, len(sentences)), 0][: len(sentences)] if len(sentences) >= 3 else []:
        changed = _NUMBER.sub(lambda m: _shift(m.group(0)), sentences[i], count=1)
        if changed == sentences[i] and names(sentences[i]) and donors:
            changed = re.sub(rf"\b{re.escape(names(sentences[i])[0])}\b", donors[0], sentences[i], count=1)
        if changed != sentences[i]:
            return " ".join([*sentences[:i], changed, *sentences[i + 1:]])
    return None



def one_in_four(source: Source, other: Source) -> str | None:
    """Three sentences of the gold contexts with the other question's first sentence third among them; None when
    the contexts hold fewer than three sentences."""
    sentences, intruder = gold_sentences(source.gold, 3), gold_sentences([other.answer], 1)
    if len(sentences) < 3 or not intruder:
        return None
    return " ".join([*sentences[:2], intruder[0], sentences[2]])



def context_sentences(gold: Sequence[str], limit: int = 2) -> str:
    """The first sentences of the first gold context: supported by construction."""
    text = " ".join(gold[0].split()) if gold else ""
    sentences = re.split(r"(?<=[.!?])\s+", text)
    return " ".join(sentences[:limit])[:400]



_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")



_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")



_COMMON = {"the", "a", "an", "it", "its", "this", "that", "these", "in", "on", "at", "yes", "no", "i", "they", "he",
           "she", "we", "there", "what", "who", "when", "where", "which", "how", "according", "however"}



def names(text: str) -> list[str]:
    """Runs of capitalised words, leading common words dropped ("The Harbour Festival" -> "Harbour Festival")."""
    found = []
    for match in _CAPITALISED.finditer(text):
        words = match.group(0).split()
        while words and words[0].lower() in _COMMON:
            words.pop(0)
        if words:
            found.append(" ".join(words))
    return list(dict.fromkeys(found))



def swap(source: Source, other: Source) -> str | None:
    """The source's answer with its numbers shifted and its first name replaced by one from the other question's
    contexts that its own contexts do not hold; None when there is nothing to swap."""
    answer = source.answer
    swapped = _NUMBER.sub(lambda m: _shift(m.group(0)), answer)
    own = set(names(answer))
    donors = [n for n in names(" ".join(other.gold)) if n not in own and n not in " ".join(source.gold)]
    if own and donors:
        first = names(swapped)[0]
        swapped = re.sub(rf"\b{re.escape(first)}\b", donors[0], swapped)
    return swapped if swapped != answer else None



def _shift(number: str) -> str:
    digits = number.replace(",", "")
    if "." in digits:
        return f"{float(digits) * 2 + 1:g}"
    value = int(digits)
    return str(value + 13 if 1000 <= value <= 2100 else value * 2 + 3)  # a year moves, a count doubles



def make_cases(runner, dataset: Dataset, questions: Sequence[Question], metrics: Sequence[str], n: int,
               kinds: Sequence[str] = tuple(KINDS)) -> list[Case]:
    """The labelled cases from the first `n` usable questions, for the metrics this dataset can score; the
    paraphrases come from `runner`'s generator. Build them once and score them with every judge compared."""
    usable, _ = runner.metrics_for(metrics)
    if not usable:
        raise DataError("the judge check has no metric to check: the ones asked need reference answers")
    return build_cases(sources(dataset, questions, n, gold_chunks(runner.workspace)), usable, kinds,
                       paraphrase=lambda text: paraphrase(runner, text),
                       add_detail=lambda text: write(runner, ADDITION_PROMPT, text))



def paraphrase(runner, text: str) -> str:
    """The generator's rewording of `text` (greedy, cached like every call)."""
    return write(runner, PARAPHRASE_PROMPT, text)



def write(runner, prompt: str, answer: str) -> str:
    """What the generator writes for `prompt` about `answer` (greedy, cached like every call)."""
    with runner.meter.stage("paraphrase", "judge_check"):
        reply = runner.generator.chat([{"role": "user", "content": prompt.format(answer=answer)}],
                                      max_tokens=256, temperature=0.0)
    return reply.text.strip()



def quick_cases(runner, questions: Sequence[Question], metrics: Sequence[str]) -> list[Case]:
    """The cases of the check before a study's first trial (`tuner judge check --quick` builds the same): a few
    questions, one supported and one unsupported case each, no paraphrase."""
    dataset = runner.workspace.dataset
    kinds = QUICK_KINDS if dataset.has_references else (*QUICK_KINDS, "context")
    return make_cases(runner, dataset, questions, metrics, QUICK_QUESTIONS, kinds)
