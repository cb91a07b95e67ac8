"""Is the judge worth optimising against, on this data? Labelled cases built from the user's own questions.

No human labels are needed: the data itself vouches for some answers and rules others out.

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

The configured judge scores every case through the usual scorer and cache, and the check reports per metric:
mean score per class, ROC AUC, accuracy at the judge's cut (judge_cut.py), unscored and empty-judgement rates per
class, agreement between two sampled judge seeds, and seconds per case. A judge that cannot separate the classes
(AUC < 0.8) or leaves one class unscored more often than the other is named before anyone optimises against it.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.data import Dataset, Question
from tuner.errors import DataError
from tuner.evaluation.judge_cut import MIDDLE, Cut, judge_cut, setting_name
from tuner.evaluation.labels import Label
from tuner.files import write_json
from tuner.metrics import JUDGED_METRICS, REGISTRY

if TYPE_CHECKING:  # the scorer imports RAGAS: reports read saved checks without it
    from tuner.evaluation.ragas_judge import Outcome, RagasScorer

log = logging.getLogger(__name__)

CHECK_FILE = "judge_check.json"
#: below this ROC AUC the judge is said not to separate supported from unsupported answers
MIN_AUC = 0.8
#: unscored shares of the two classes further apart than this bias every mean (one class drops out more)
MAX_UNSCORED_GAP = 0.2
#: folds of the cross-validated cut; resamples of the AUC's bootstrap interval
CUT_FOLDS = 5
BOOTSTRAP_RESAMPLES = 500

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


@dataclass(frozen=True)
class CaseScore:
    case: Case
    value: float | None
    failure: str | None
    seconds: float
    paid_calls: int
    cached_calls: int
    #: the scores under two sampled judge seeds (agreement), when asked for
    samples: tuple[float | None, ...] = ()
    #: what the case's judge calls took when they were paid, cached ones included (its seconds on a cold cache);
    #: None when a cached call's time is unknown
    cold_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.case), "supported": self.case.supported, "value": self.value,
                "failure": self.failure, "seconds": round(self.seconds, 3), "paid_calls": self.paid_calls,
                "cached_calls": self.cached_calls, "samples": list(self.samples),
                "cold_seconds": None if self.cold_seconds is None else round(self.cold_seconds, 3)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseScore:
        case = Case(data["metric"], data["question_id"], data["kind"], data["question"], data["answer"],
                    tuple(data["contexts"]), data.get("reference"))
        return cls(case, data.get("value"), data.get("failure"), data.get("seconds", 0.0),
                   data.get("paid_calls", 0), data.get("cached_calls", 0), tuple(data.get("samples", [])),
                   data.get("cold_seconds"))


def score_cases(scorer: RagasScorer, meter, cases: Sequence[Case], agreement: int = 0,
                on_progress: Callable[[int, Case], None] | None = None) -> list[CaseScore]:
    """Each case judged as a study would (greedy); the first `agreement` cases of each metric also under two
    sampled judge seeds."""
    results, sampled = [], {m: 0 for m in JUDGED_METRICS}
    for index, case in enumerate(cases):
        if on_progress:
            on_progress(index, case)
        started = time.perf_counter()
        with meter.stage(case.key, "judge_check") as cost:
            outcome = _score(scorer, case)
        seconds = time.perf_counter() - started
        paid, cached = cost.llm_calls, cost.cache_hits
        cold = None if cost.unmetered_hits else seconds + cost.saved_seconds
        samples: tuple[float | None, ...] = ()
        if sampled[case.metric] < agreement:
            sampled[case.metric] += 1
            samples = tuple(_score(scorer, case, sample_round).value for sample_round in (1, 2))
        results.append(CaseScore(case, outcome.value, outcome.failure, seconds, paid, cached, samples, cold))
    return results


def _score(scorer: RagasScorer, case: Case, sample_round: int = 0) -> Outcome:
    scorer.judge.sample_round = sample_round
    try:
        return scorer.score(case.metric, case.question, case.answer, list(case.contexts), case.reference)
    finally:
        scorer.judge.sample_round = 0


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """ROC AUC: the chance a supported case outscores an unsupported one (ties count half)."""
    if not positives or not negatives:
        return None
    ordered = sorted(negatives)
    wins = sum(bisect_left(ordered, p) + 0.5 * (bisect_right(ordered, p) - bisect_left(ordered, p))
               for p in positives)
    return wins / (len(positives) * len(negatives))


def auc_interval(positives: Sequence[float], negatives: Sequence[float], level: float = 0.95,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float] | None:
    """The AUC's percentile bootstrap interval, each class resampled on its own (seeded: a check says the same
    twice). Ten unsupported cases leave an AUC uncertain by ±0.1: the interval says so."""
    if len(positives) < 2 or len(negatives) < 2:
        return None
    rng = random.Random(0)
    draws = sorted(auc(rng.choices(positives, k=len(positives)), rng.choices(negatives, k=len(negatives)))
                   for _ in range(resamples))
    tail = (1 - level) / 2
    return draws[int(tail * resamples)], draws[min(resamples - 1, int((1 - tail) * resamples))]


Verdict = tuple[float | None, bool]  # (score, supported?): an unscored case has no score


def balanced_accuracy(verdicts: Sequence[Verdict], cut: float) -> float | None:
    """The mean of the two classes' accuracies when a score at or above `cut` reads supported (an unscored case
    is wrong): what a cut is worth when one class is rare, as hallucinations are."""
    classes = [[v for v, supported in verdicts if supported == side] for side in (True, False)]
    if not all(classes):
        return None
    right = (sum(v is not None and v >= cut for v in classes[0]) / len(classes[0]),
             sum(v is not None and v < cut for v in classes[1]) / len(classes[1]))
    return sum(right) / 2


def best_cut(verdicts: Sequence[Verdict]) -> float | None:
    """The cut with the best balanced accuracy on `verdicts`, midway between neighbouring scores (of equals, the
    one nearest the middle)."""
    values = sorted({v for v, _ in verdicts if v is not None})
    if balanced_accuracy(verdicts, MIDDLE) is None or not values:
        return None
    candidates = [(a + b) / 2 for a, b in zip(values, values[1:])] or values
    return max(candidates, key=lambda cut: (balanced_accuracy(verdicts, cut), -abs(cut - MIDDLE)))


def cross_validated(verdicts: Sequence[Verdict], folds: int = CUT_FOLDS) -> float | None:
    """Balanced accuracy of a cut chosen without the labels it is scored on: each fold is classified by the best
    cut of the other folds (stratified, seeded). None with fewer cases of a class than folds."""
    classes = [[x for x in verdicts if x[1] == side] for side in (True, False)]
    if min(len(c) for c in classes) < folds:
        return None
    rng, assigned = random.Random(0), [[] for _ in range(folds)]
    for members in classes:
        members = list(members)
        rng.shuffle(members)
        for i, member in enumerate(members):
            assigned[i % folds].append(member)
    predicted = []
    for i, held in enumerate(assigned):
        cut = best_cut([x for j, fold in enumerate(assigned) if j != i for x in fold])
        predicted += [((1.0 if v is not None and v >= cut else 0.0) if v is not None else None, s) for v, s in held]
    return balanced_accuracy(predicted, 0.5)


@dataclass(frozen=True)
class ClassStats:
    cases: int
    mean: float | None
    unscored: float  # share left without a score (NaN, unparsable, refusal, ...)
    empty: float  # share the judge extracted nothing from, scored 0 by the empty-judgement rule

    @classmethod
    def of(cls, scored: Sequence[CaseScore]) -> ClassStats:
        values = [s.value for s in scored if s.value is not None]
        n = len(scored)
        return cls(n, sum(values) / len(values) if values else None,
                   sum(s.value is None for s in scored) / n if n else 0.0,
                   sum(s.failure == "empty" for s in scored) / n if n else 0.0)


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    supported: ClassStats
    unsupported: ClassStats
    auc: float | None
    #: share of all cases on the right side of the cut (`read_at`; an unscored case counts as wrong)
    accuracy: float
    #: share of the doubly sampled cases whose two sampled verdicts fall on the same side of 0.5
    agreement: float | None
    agreement_cases: int
    #: mean seconds of a case on a cold cache (a cached call counts at what it took when paid); None when unknown
    seconds_per_case: float | None
    by_kind: Mapping[str, float | None] = field(default_factory=dict)
    #: the AUC's 95 % bootstrap interval
    auc_interval: tuple[float, float] | None = None
    #: the cut with the best balanced accuracy on these cases, and the balanced accuracy of a cut chosen without
    #: the cases it classifies (cross-validated), beside the one at the judge's cut
    cut: float | None = None
    balanced_accuracy: float | None = None
    balanced_accuracy_at_cut: float | None = None
    #: the judge's cut, where `accuracy` and `balanced_accuracy_at_cut` read a score as supported
    read_at: float = MIDDLE

    @classmethod
    def of(cls, metric: str, scored: Sequence[CaseScore], cut: float = MIDDLE) -> MetricCheck:
        mine = [s for s in scored if s.case.metric == metric]
        pos = [s for s in mine if s.case.supported]
        neg = [s for s in mine if not s.case.supported]
        right = sum(s.value is not None and (s.value >= cut) == s.case.supported for s in mine)
        pairs = [s.samples for s in mine if len(s.samples) == 2 and None not in s.samples]
        cold = [s.cold_seconds for s in mine if s.cold_seconds is not None] or \
            [s.seconds for s in mine if s.paid_calls and not s.cached_calls]  # a check saved before cold_seconds
        kinds = {}
        for kind in REGISTRY[metric].check_kinds:
            values = [s.value for s in mine if s.case.kind == kind and s.value is not None]
            if any(s.case.kind == kind for s in mine):
                kinds[kind] = sum(values) / len(values) if values else None
        scores = ([s.value for s in pos if s.value is not None], [s.value for s in neg if s.value is not None])
        verdicts = [(s.value, s.case.supported) for s in mine]
        return cls(metric, ClassStats.of(pos), ClassStats.of(neg), auc(*scores),
                   right / len(mine) if mine else 0.0,
                   sum((a >= MIDDLE) == (b >= MIDDLE) for a, b in pairs) / len(pairs) if pairs else None,
                   sum(len(s.samples) == 2 for s in mine),
                   sum(cold) / len(cold) if cold else None, kinds, auc_interval(*scores), best_cut(verdicts),
                   cross_validated(verdicts), balanced_accuracy(verdicts, cut), cut)

    @property
    def flip_rate(self) -> float | None:
        """Share of the doubly sampled cases whose verdict changes side of 0.5 under another seed."""
        return None if self.agreement is None else 1 - self.agreement

    @property
    def problems(self) -> list[str]:
        """What makes this judge unsafe to optimise against on this data, one sentence each."""
        out = []
        if self.auc is None:
            out.append(f"{self.metric}: a class has no scored case, so the judge's separation cannot be told")
        elif self.auc < MIN_AUC:
            out.append(f"{self.metric}: the judge barely separates supported from unsupported answers on this data "
                       f"(AUC {self.auc:.2f} < {MIN_AUC})")
        gap = self.unsupported.unscored - self.supported.unscored
        if abs(gap) > MAX_UNSCORED_GAP:
            worse = "unsupported" if gap > 0 else "supported"
            out.append(f"{self.metric}: {worse} cases go unscored more often ({self.supported.unscored:.0%} of "
                       f"supported, {self.unsupported.unscored:.0%} of unsupported), so means leave them out "
                       f"unevenly")
        return out

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: the faithfulness verdict settings `tuner judge check --settings` compares: RAGAS's own first
VERDICT_SETTINGS: tuple[Mapping[str, str], ...] = (
    {"verdicts": "sampled", "statements": "judge"},
    {"verdicts": "graded", "statements": "judge"},
    {"verdicts": "graded", "statements": "sentences"},
    {"verdicts": "graded", "statements": "sentences", "verdict_contexts": "each"},
    {"verdicts": "graded", "statements": "sentences", "verdict_prompt": "nli"},
    {"verdicts": "graded", "statements": "sentences", "verdict_contexts": "each", "verdict_prompt": "nli"},
)
#: AUCs closer than this are one: the faster setting is the one to use
SAME_AUC = 0.02


@dataclass(frozen=True)
class JudgeCheck:
    judge: str
    dataset: str
    empty_judgement: str
    metrics: Mapping[str, MetricCheck]
    cases: tuple[CaseScore, ...]
    #: cases left out because their prompts would not fit the judge's context window (`window` tokens)
    too_long: tuple[str, ...] = ()
    window: int | None = None
    #: the faithfulness verdict setting judged with (`setting_name`)
    setting: str = "sampled"
    #: where a graded score reads as supported, and why there (judge_cut.py)
    cut: Cut = Cut(MIDDLE, "the middle")

    @classmethod
    def of(cls, judge: str, dataset: str, empty_judgement: str, scored: Sequence[CaseScore],
           too_long: Sequence[str] = (), window: int | None = None, setting: str = "sampled",
           cut: Cut = Cut(MIDDLE, "the middle")) -> JudgeCheck:
        metrics = list(dict.fromkeys(s.case.metric for s in scored))
        return cls(judge, dataset, empty_judgement, {m: MetricCheck.of(m, scored, cut.value) for m in metrics},
                   tuple(scored), tuple(too_long), window, setting, cut)

    @property
    def problems(self) -> list[str]:
        left_out = [f"{len(self.too_long)} case(s) left out: their judge prompts would not fit the judge's "
                    f"{self.window}-token context window (raise judge n_ctx), e.g. {self.too_long[0]}"] \
            if self.too_long else []
        return [p for m in self.metrics.values() for p in m.problems] + left_out

    @property
    def questions(self) -> list[str]:
        return list(dict.fromkeys(s.case.question_id for s in self.cases))

    def to_json(self) -> dict[str, Any]:
        return {"judge": self.judge, "dataset": self.dataset, "empty_judgement": self.empty_judgement,
                "setting": self.setting, "cut": self.cut.value, "cut_source": self.cut.source,
                "questions": self.questions, "problems": self.problems, "too_long": list(self.too_long),
                "window": self.window,
                "metrics": {m: c.to_json() for m, c in self.metrics.items()},
                "cases": [s.to_json() for s in self.cases]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeCheck:
        scored = [CaseScore.from_json(c) for c in data.get("cases", [])]
        return cls.of(data["judge"], data.get("dataset", ""), data.get("empty_judgement", "unsupported"), scored,
                      data.get("too_long", ()), data.get("window"), data.get("setting", "sampled"),
                      Cut(data.get("cut", MIDDLE), data.get("cut_source", "the middle")))


def choose(checks: Sequence[JudgeCheck], metric: str = "faithfulness") -> tuple[JudgeCheck, str] | None:
    """The check whose judge and setting to use for `metric`: the best AUC, and of AUCs within SAME_AUC of it the
    fastest; with the sentence that says why. None when fewer than two checks have an AUC and a time to compare."""
    known = [c for c in checks if metric in c.metrics and c.metrics[metric].auc is not None
             and c.metrics[metric].seconds_per_case is not None]
    if len(known) < 2:
        return None
    best_auc = max(c.metrics[metric].auc for c in known)
    chosen = min((c for c in known if c.metrics[metric].auc >= best_auc - SAME_AUC),
                 key=lambda c: c.metrics[metric].seconds_per_case)
    mine = chosen.metrics[metric]
    others = "; ".join(f"{c.setting} ({c.judge}): AUC {c.metrics[metric].auc:.2f}, "
                       f"{c.metrics[metric].seconds_per_case:.1f} s" for c in known if c is not chosen)
    return chosen, (f"use {metric} {chosen.setting} with {chosen.judge}: AUC {mine.auc:.2f} at "
                    f"{mine.seconds_per_case:.1f} s a case (the best AUC, or within {SAME_AUC} of it and the "
                    f"fastest); {others}")


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


def tokens_needed(judge, max_tokens: int, case: Case) -> int:
    """What the case's largest judge prompt and its reply take of the judge's context window, at most."""
    texts = [case.question, case.answer, *case.contexts, case.reference or ""]
    return REGISTRY[case.metric].template_tokens + judge.count_tokens("\n".join(texts)) + max_tokens


def check_judge(runner, cases: Sequence[Case], agreement: int = 0,
                on_progress: Callable[[int, Case], None] | None = None) -> JudgeCheck:
    """`cases` scored by `runner`'s judge. Every case is measured against the judge's context window before the
    first call: one that cannot fit is left out and named, not met minutes in (a case that still overflows is
    that case's failure, and the others are kept)."""
    judge, budget = runner.judge, runner.workspace.config.judge_tokens
    window = judge.context_window
    too_long = tuple(case.key for case in cases if window and tokens_needed(judge, budget, case) > window)
    kept = [case for case in cases if case.key not in too_long]
    scored = score_cases(runner.scorer, runner.meter, kept, agreement, on_progress)
    evaluation = runner.workspace.config.evaluation
    setting = setting_name(evaluation, judge.why_read_off_text)
    return JudgeCheck.of(judge.name, runner.workspace.dataset.name, evaluation.empty_judgement, scored, too_long,
                         window, setting, judge_cut(evaluation, judge.name, setting))


def paraphrase(runner, text: str) -> str:
    """The generator's rewording of `text` (greedy, cached like every call)."""
    return write(runner, PARAPHRASE_PROMPT, text)


def write(runner, prompt: str, answer: str) -> str:
    """What the generator writes for `prompt` about `answer` (greedy, cached like every call)."""
    with runner.meter.stage("paraphrase", "judge_check"):
        reply = runner.generator.chat([{"role": "user", "content": prompt.format(answer=answer)}],
                                      max_tokens=256, temperature=0.0)
    return reply.text.strip()


def checks_json(checks: Sequence[JudgeCheck]) -> dict[str, Any]:
    return {"judges": [c.to_json() for c in checks]}


def parse_checks(data: Any) -> list[JudgeCheck]:
    """The checks in a saved document; [] when there is none or it cannot be read (a report never fails on it)."""
    try:
        return [JudgeCheck.from_json(c) for c in data["judges"]]
    except (ValueError, KeyError, TypeError):
        return []


def save_checks(checks: Sequence[JudgeCheck], out: Path | None = None, study=None,
                against_labels: bool = False) -> str:
    """Keep the checks, and say where: a study's own check (no --out, not against labels) is kept with the study
    (`study`: its StudyFolder), where its report shows it; any other goes to a file, never replacing the study's
    check on its data."""
    if out is None and study is not None and not against_labels:
        study.write_doc(CHECK_FILE, checks_json(checks))
        return f"saved with study {study.name}"
    out = out or Path("reports") / ("judge-check-labels.json" if against_labels else "judge-check.json")
    write_json(out, checks_json(checks))
    return f"written to {out}"


def load_checks(path: Path) -> list[JudgeCheck]:
    try:
        return parse_checks(json.loads(path.read_text()))
    except (OSError, ValueError):
        return []


def quick_cases(runner, questions: Sequence[Question], metrics: Sequence[str]) -> list[Case]:
    """The cases of the check before a study's first trial (`tuner judge check --quick` builds the same): a few
    questions, one supported and one unsupported case each, no paraphrase."""
    dataset = runner.workspace.dataset
    kinds = QUICK_KINDS if dataset.has_references else (*QUICK_KINDS, "context")
    return make_cases(runner, dataset, questions, metrics, QUICK_QUESTIONS, kinds)


def quick_check(runner, questions: Sequence[Question], metrics: Sequence[str]) -> JudgeCheck:
    """The check before a study's first trial."""
    return check_judge(runner, quick_cases(runner, questions, metrics))
