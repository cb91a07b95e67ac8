"""A test set written from a corpus: `tuner data generate DATASET --questions N`.

Three kinds of question, with shares the user sets:
* single-hop: written from one chunk; gold = its document;
* multi-hop: written from two chunks of two documents linked by a title one names or a name both use (the entity
  extractor of graph expansion); gold = both documents; the judge must find that neither chunk alone answers it;
* unanswerable: about a chunk's subject but asking what it does not say; no gold ids, the reference says the
  documents do not contain the answer, and the judge must find that the top retrieved chunks do not answer it.

Source chunks come round-robin over the documents in a seeded order, so no document supplies more than its share.
Every candidate passes the text gates (gates.py) and then the judge; every rejection is counted by gate in the
scorecard. Calls go through the shared LLM cache, so a run stopped by Ctrl-C or kill -9 resumes without paying a
call twice: the candidates are drawn in the same order and the paid ones answer from the cache.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tuner.config import PipelineConfig
from tuner.data import Dataset, Question
from tuner.errors import DataError
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.llms import LLM
from tuner.pipeline.chunking import Chunk
from tuner.pipeline.graph import extract_entities
from tuner.testset.gates import OverlapGate, Rejected, check_new, clean_question, parse_reply
from tuner.testset.kinds import KINDS
from tuner.testset.styles import STYLES, TOPIC, StyleMix
from tuner.testset.validity import DEFAULT_OVERLAP, DISAGREE, content_words, discriminating, lexical_overlap

#: the reference answer of an unanswerable question: a refusal, as the answer programs are told to give
UNANSWERABLE = "The documents do not contain the answer to this question."
#: questions one chunk may source: a corpus of few chunks is gone round this many times at most
QUESTIONS_PER_CHUNK = 3
#: candidates drawn per question asked, at most, before a kind is given up as short
ATTEMPTS_PER_QUESTION = 3
#: retrieved chunks the judge reads to decide an unanswerable question is not answered by the corpus
UNANSWERED_TOP = 5
#: a single-hop question's gold is completed by pooling, as test collections are built: the top POOL_DEPTH chunks of
#: each POOL search, each judged; every other document that answers it is gold too. Without this, a configuration
#: that finds another document answering the question is scored as missing it, which favours the retriever closest
#: to the source's wording
POOL_DEPTH = 5
#: the searches pooled: keyword search plain and stemmed, vector search, and hybrid search under both of Weaviate's
#: fusions. As test collections pool from every system they compare: a document only an unpooled search finds would
#: be unjudged, so that search would look worse (unpooled, the ranked-fusion hybrids scored below pure keyword
#: search on vaswani's generated searches and above it on people's)
POOL = ({"alpha": 0.0, "stemmer": "none"}, {"alpha": 0.0, "stemmer": "english"}, {"alpha": 1.0},
        {"alpha": 0.5, "fusion": "relative_score"}, {"alpha": 0.5, "fusion": "ranked"})
#: a pooled document is gold when the judge says yes AND is nearly as sure of it (within this) as of the passage the
#: question was written from, judged alike. A small judge says a soft yes to most passages on a subject (the 1.5B to
#: 85 % of what vaswani's topic searches pooled), so its yes alone made nearly the whole pool gold and rewarded the
#: searches that agree with the pool; its certainty on the source is a yardstick on its own scale, whatever the judge
NEAR_SOURCE = 0.1
#: chunks the default hybrid search returns for a broad search's source, among which its other documents are found
NEIGHBOURS_TOP = 10
#: characters of a source chunk a prompt shows
CHUNK_CHARS = 2000
#: a word at most this share of the corpus's chunks use (one at least) is specific: a question naming one of its
#: source's specific words says what it is about, even in a corpus without titles or names
SPECIFIC_SHARE = 0.01
#: the retrieval configurations a new set's questions are scored on, to count those that separate configurations:
#: keyword, hybrid and vector search, the axis a set's wording tilts
PROBE = {"keyword (alpha 0)": {"alpha": 0.0}, "hybrid (alpha 0.5)": {"alpha": 0.5}, "vector (alpha 1)": {"alpha": 1.0}}
#: a judge's P(yes) above this is a yes
YES = 0.5
WRITE_TOKENS = 200

_SYSTEM = ("You write test questions for a search system over a collection of documents. A user of the collection "
           "asks each question without seeing any document, so a question names its subject (the person, place or "
           "thing, by name) and never refers to 'the passage', 'the text' or 'the document'. The user words it in "
           "their own everyday vocabulary, not the document's. Reply with JSON only.")
# from what a reader needs (the topic, the fact), not from the passage's sentences
_SINGLE = ("Document: {title}\nPassage:\n{text}\n{asked}\nA reader who has not seen this passage needs one fact it "
           "gives. Say the passage's topic in a few words of your own and the fact the reader needs, then write the "
           "question that reader would ask: {style}, {length}. Give its answer from the passage (one short sentence). "
           "Reply with JSON: {{\"topic\": \"...\", \"fact\": \"...\", \"question\": \"...\", \"answer\": \"...\"}}")
# what both search prompts ask: the subject and an aspect, as a phrase (asked for the subject alone, the 1.5B wrote
# one or two words, which the length gate rejected, for half of vaswani's candidates). Where the documents are
# ("like it" or "on it", "the passage" or "the first passage") goes between the pieces
_ASPECT = ("(what is measured, made, explained or used, and how), then write what that reader would type into a "
           "library catalogue's search box to find documents ")
_PHRASE = (": a phrase of {length} naming the subject and that aspect, not a question (no question word, no question "
           "mark). Give what ")
_SEARCH_REPLY = (" says on it (one short sentence). Reply with JSON: {{\"subject\": \"...\", \"aspect\": \"...\", "
                 "\"search\": \"...\", \"answer\": \"...\"}}")
# a topic search: what a reader types to find documents on a subject, which names no one thing a question would
_SEARCH = ("Document: {title}\nPassage:\n{text}\n{asked}\nA reader who has not seen this passage wants documents on "
           "its subject. Say its subject in a few words of your own, and the aspect of it the passage treats "
           + _ASPECT + "like it" + _PHRASE + "the passage" + _SEARCH_REPLY)
# a search for a subject several documents serve: written from them together, it names what they share
_SEARCH_BROAD = ("{passages}\n{asked}\nA reader who has not seen these passages wants documents on the subject they "
                 "share. Say that subject in a few words of your own, and the aspect of it they treat "
                 + _ASPECT + "on it" + _PHRASE + "the first passage" + _SEARCH_REPLY)
_MULTI = ("Document 1: {title}\nPassage 1:\n{text}\n\nDocument 2: {title2}\nPassage 2:\n{text2}\n\nBoth passages "
          "concern \"{link}\". Write one question whose answer needs a fact from passage 1 AND a fact from passage 2 "
          "(neither passage alone answers it), and its answer (one short sentence). Reply with JSON: "
          "{{\"question\": \"...\", \"answer\": \"...\"}}")
_UNANSWERABLE = ("Document: {title}\nPassage:\n{text}\n{asked}\nWrite one question about the subject of this passage "
                 "that a user might well ask but that the passage does NOT answer: it asks for a specific fact the "
                 "passage does not give. Reply with JSON: {{\"question\": \"...\"}}")
# the passage is not shown: what a question keeps of its wording after this is what a user would say too
_REWRITE = ("Someone who has never read the documents types this question into a search box:\n{question}\n\nRewrite "
            "it as that person would ask it: plain everyday words, a common word in place of each technical or rare "
            "one where there is one, {length}. Keep the names of people, places and things, and keep what it asks."
            "{avoid} Reply with JSON: {{\"question\": \"...\"}}")
_REWRITE_SEARCH = ("Someone who has never read the documents types this into a library catalogue's search box:\n"
                   "{question}\n\nRewrite it in other words as that person would type it: a phrase of {length} "
                   "naming the same subject and aspect, not a question (no question word).{avoid} Reply with JSON: "
                   "{{\"question\": \"...\"}}")
_AVOID = " Do not use these words: {words}."
_SUPPORTED = ("Passages:\n{passages}\n\nQuestion: {question}\nProposed answer: {answer}\n\nDo the passages answer "
              "the question, and do they support the proposed answer? Reply yes or no.")
_ALONE = ("Passage:\n{passage}\n\nQuestion: {question}\n\nDoes this passage alone fully answer the question? Reply "
          "yes or no.")
# a topic search is not answered but served: a passage about its subject is what it wants
_ABOUT = ("Passage:\n{passage}\n\nSearch: {question}\n\nIs this passage about what this search asks for? Reply yes "
          "or no.")
_ANSWERED = "Passages:\n{passages}\n\nQuestion: {question}\n\nDo these passages answer the question? Reply yes or no."


@dataclass(frozen=True)
class Form:
    """How one form of candidate is written, reworded and judged. A question names its subject and is judged
    answered by its source (pooled documents: each alone); a topic search names a subject only and is judged served
    by a passage about it."""

    write: str
    fields: tuple[str, ...]  # the reply's fields, the question (or search) first
    notes: tuple[str, ...] = ()  # fields a schema-following model writes before them
    rewrite: str = _REWRITE
    supported: str = _SUPPORTED
    pooled: str = _ALONE
    search: bool = False


#: a single-hop source's form when its style is TOPIC
SEARCH = Form(_SEARCH, ("search", "answer"), ("subject", "aspect"), _REWRITE_SEARCH, _ABOUT, _ABOUT,
              search=True)
#: the same, written from its source and the documents nearest it (StyleMix.breadth > 1)
BROAD_SEARCH = replace(SEARCH, write=_SEARCH_BROAD)
#: each kind's form otherwise
FORMS = {"single-hop": Form(_SINGLE, ("question", "answer"), ("topic", "fact")),
         "multi-hop": Form(_MULTI, ("question", "answer")),
         "unanswerable": Form(_UNANSWERABLE, ("question",))}


@dataclass(frozen=True)
class Source:
    """What one candidate is written from: one chunk, or two linked by `link`."""

    kind: str
    chunks: tuple[Chunk, ...]
    link: str = ""


@dataclass
class Scorecard:
    asked: int
    shares: dict[str, float]
    generator: str = ""
    judge: str = ""
    kept: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    drawn: Counter = field(default_factory=Counter)
    documents: int = 0
    covered: int = 0
    question_words: list[int] = field(default_factory=list)
    llm_calls: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: the mean lexical overlap with their sources the kept questions were held to, where it came from, what they
    #: reached, and how many candidates needed a second rewrite to get under it
    overlap_target: float = DEFAULT_OVERLAP
    overlap_from: str = ""
    overlap: float | None = None
    rewrites: int = 0
    #: gold documents besides their sources that pooling found answering kept questions
    pooled: int = 0
    styles: Counter = field(default_factory=Counter)
    styles_from: str = ""  # StyleMix.describe(): in turn, or the anchors' shares
    #: kept questions with gold ids on which the PROBE configurations' nDCG@10 spans DISAGREE or more, of how many
    discriminating: int = 0
    ranked: int = 0
    #: AnchorCheck.to_json() when people's questions were given
    anchors: dict | None = None

    def to_json(self) -> dict:
        words = sorted(self.question_words)
        return {"schema": 1, "asked": self.asked, "shares": self.shares, "generator": self.generator,
                "judge": self.judge, "kept": {k: self.kept[k] for k in KINDS},
                "drawn": {k: self.drawn[k] for k in KINDS}, "rejected": dict(self.rejected.most_common()),
                "documents": self.documents, "documents_covered": self.covered,
                "question_words": {"min": words[0], "median": words[len(words) // 2], "max": words[-1]}
                if words else {}, "llm_calls": self.llm_calls, "cache_hits": self.cache_hits,
                "seconds": round(self.seconds, 1), "notes": self.notes,
                # paid or answered by the cache: what a kept question costs a run that starts cold
                "calls_per_question": round((self.llm_calls + self.cache_hits) / max(sum(self.kept.values()), 1), 1),
                "overlap": {"target": self.overlap_target, "from": self.overlap_from,
                            "kept": None if self.overlap is None else round(self.overlap, 2)},
                "rewritten_twice": self.rewrites, "pooled_gold": self.pooled, "styles": dict(self.styles.most_common()),
                "styles_from": self.styles_from,
                "discriminating": {"questions": self.discriminating, "of": self.ranked,
                                   "configurations": list(PROBE), "spread": DISAGREE},
                **({"anchors": self.anchors} if self.anchors else {})}


def targets(n: int, shares: dict[str, float]) -> dict[str, int]:
    """How many of each kind: the shares of n, rounded so they sum to n (largest remainders first)."""
    total = sum(shares.values())
    if total <= 0 or any(v < 0 for v in shares.values()):
        raise DataError("question shares must be ≥ 0 and not all 0")
    exact = {k: n * shares.get(k, 0) / total for k in KINDS}
    counts = {k: int(v) for k, v in exact.items()}
    for k in sorted(KINDS, key=lambda k: exact[k] - counts[k], reverse=True)[:n - sum(counts.values())]:
        counts[k] += 1
    return counts


def spread(chunks: Sequence[Chunk], seed: int) -> list[Chunk]:
    """Chunks round-robin over documents in a seeded order: the first k cover min(k, documents) documents, and no
    document supplies more than one chunk more than any other."""
    rng = random.Random(seed)
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_doc[chunk.doc_id].append(chunk)
    order = sorted(by_doc)
    rng.shuffle(order)
    for doc in order:
        rng.shuffle(by_doc[doc])
    return [by_doc[doc][round_] for round_ in range(max(map(len, by_doc.values()), default=0))
            for doc in order if round_ < len(by_doc[doc])]


def linked_pairs(chunks: Sequence[Chunk], titles: dict[str, str], seed: int) -> list[Source]:
    """Chunk pairs of two documents joined by a title one names (to the named document's lead) or by a name only
    those two documents use; seeded order, each document in as few pairs as the order allows."""
    leads: dict[str, Chunk] = {}
    for chunk in chunks:
        leads.setdefault(chunk.doc_id, chunk)
    # names as graph expansion finds them (capitalised spans, lower-cased), once per chunk: a title is named where
    # it is one of a chunk's names — a set lookup, so a corpus of thousands of titles costs no regex per pair
    per_chunk = [extract_entities(chunk.text) for chunk in chunks]
    named = {title.lower(): doc for doc, title in titles.items() if len(title) > 3 and not title.isdigit()}
    pairs: dict[frozenset, Source] = {}
    users: dict[str, dict[str, Chunk]] = defaultdict(dict)
    for chunk, names in zip(chunks, per_chunk):
        for name in names:
            doc = named.get(name)
            if doc is not None and doc != chunk.doc_id:
                pairs.setdefault(frozenset((chunk.doc_id, doc)), Source("multi-hop", (chunk, leads[doc]),
                                                                         titles[doc]))
            users[name].setdefault(chunk.doc_id, chunk)
    for name, docs in sorted(users.items()):
        if len(docs) == 2 and " " in name:  # a two-word name only two documents use: specific enough to link them
            first, second = sorted(docs)
            pairs.setdefault(frozenset(docs), Source("multi-hop", (docs[first], docs[second]), name.title()))
    found = sorted(pairs.values(), key=lambda s: (s.chunks[0].id, s.chunks[1].id))
    random.Random(seed).shuffle(found)
    uses: Counter = Counter()
    ordered = []
    while found:  # greedily the pair whose documents were used least
        best = min(range(len(found)), key=lambda i: sum(uses[c.doc_id] for c in found[i].chunks))
        source = found.pop(best)
        uses.update(c.doc_id for c in source.chunks)
        ordered.append(source)
    return ordered


def plan(n: int, shares: dict[str, float], chunks: int, pairs: int, at_most: bool, notes: list[str]) -> dict[str, int]:
    """Questions per kind: multi-hop ones the linked pairs cannot source become single-hop; more single-hop and
    unanswerable ones than QUESTIONS_PER_CHUNK per chunk is an error, or (`at_most`) fewer questions. What changed
    goes to `notes`."""
    want = targets(n, shares)
    if want["multi-hop"] > pairs:
        moved = want["multi-hop"] - pairs
        notes.append(f"the corpus has {pairs} linked document pair(s) for {want['multi-hop']} multi-hop "
                     f"question(s): {moved} written as single-hop instead")
        want["multi-hop"], want["single-hop"] = pairs, want["single-hop"] + moved
    sources = QUESTIONS_PER_CHUNK * chunks
    if want["single-hop"] + want["unanswerable"] <= sources:
        return want
    if not at_most:
        raise DataError(f"--questions {n}: the corpus has {chunks} chunks and {pairs} linked pairs; at most "
                        f"{QUESTIONS_PER_CHUNK} questions come from one chunk — ask for at most {sources + pairs}")
    notes.append(f"the corpus has {chunks} chunks and {pairs} linked pairs: {sources + want['multi-hop']} "
                 f"questions asked instead of {n}")
    return plan(sources + want["multi-hop"], shares, chunks, pairs, True, notes)  # fewer each time: it ends


class QuestionWriter:
    """Writes candidates with the generator, passes them through the gates and the judge, keeps what survives."""

    def __init__(self, runner: RagRunner, dataset: Dataset, seed: int = 0,
                 existing: Sequence[Question] = (), overlap: tuple[float, str] = (DEFAULT_OVERLAP, "the default"),
                 mix: StyleMix | None = None):
        self.runner, self.dataset, self.seed = runner, dataset, seed
        self.mix = mix or StyleMix()  # turn -> the style and length a single-hop candidate is asked in
        #: the mean lexical overlap the kept questions are held to, and where that figure comes from
        self.overlap, self.overlap_source = OverlapGate(overlap[0]), overlap[1]
        self.rewrites = 0  # candidates rewritten a second time, told the source's words to avoid
        self.pooled = 0  # gold documents pooling added
        self.styles: Counter = Counter()
        #: ids gen-0001, ...; appended ones after the ids already there (gen-a1-0001 for a first append)
        taken = {q.id for q in existing}
        self.prefix = next(p for p in ("gen-", *(f"gen-a{k}-" for k in range(1, 10_000)))
                           if not any(i.startswith(p) for i in taken))
        self.titles = {d.id: d.title for d in dataset.documents}
        #: the chunks questions are written from (RAPTOR summaries are not sources)
        self.chunks = [c for c in runner.workspace.index.chunks if c.level == 0]
        #: word -> the chunks that use it
        self.chunk_count = Counter(w for c in self.chunks for w in set(_words(c.text)))
        self.specific_below = max(1.0, SPECIFIC_SHARE * len(self.chunks))
        self.kept_vectors: list[np.ndarray] = []
        #: chunk id -> the questions kept from it, in order
        self.asked: dict[str, list[str]] = defaultdict(list)
        if existing:  # --append: new questions must not repeat the ones already there
            self.kept_vectors = list(runner.workspace.embedder.encode([q.text for q in existing]))

    def write(self, n: int, shares: dict[str, float], on_progress: Callable[[int, int], None] | None = None,
              at_most: bool = False) -> tuple[list[Question], Scorecard]:
        """`n` questions of the kinds `shares` asks for; `at_most`: fewer when the corpus has too few sources."""
        started = time.perf_counter()
        chunks = self.chunks
        card = Scorecard(asked=n, shares={k: shares.get(k, 0.0) for k in KINDS}, documents=len(self.titles))
        stream = spread(chunks, self.seed)
        pairs = linked_pairs(chunks, self.titles, self.seed) if shares.get("multi-hop") else []
        want = plan(n, shares, len(stream), len(pairs), at_most, card.notes)
        # single-hop and unanswerable questions draw from one stream, so the round-robin over documents holds across
        # both; a small corpus is gone round again (a chunk's later prompts name the questions it already gave).
        # Unanswerable ones get one more round of their own: single-hop rejections may have used up the stream
        chunk_stream = itertools.chain.from_iterable(itertools.repeat(stream, QUESTIONS_PER_CHUNK))
        sources = {"single-hop": chunk_stream, "multi-hop": iter(pairs),
                   "unanswerable": itertools.chain(chunk_stream, stream)}
        questions: list[Question] = []

        def draw(kind: str, count: int) -> int:
            """Up to `count` more questions of `kind`, at most ATTEMPTS_PER_QUESTION candidates each; how many kept."""
            kept = 0
            for _ in range(count * ATTEMPTS_PER_QUESTION):
                item = next(sources[kind], None) if kept < count else None
                if item is None:
                    break
                card.drawn[kind] += 1
                try:
                    source = Source(kind, (item,)) if isinstance(item, Chunk) else item
                    questions.append(self.candidate(source, turn=card.drawn[kind] - 1))
                    card.kept[kind] += 1
                    kept += 1
                except Rejected as rejected:
                    card.rejected[rejected.gate] += 1
                if on_progress:
                    on_progress(len(questions), sum(want.values()))
            return kept

        for kind in KINDS:
            if draw(kind, want[kind]) < want[kind]:
                card.notes.append(f"{kind}: {card.kept[kind]} of {want[kind]} kept after {card.drawn[kind]} "
                                  f"candidates (see the gates' rejections)")
        # what the gates left short is written as single-hop questions, the kind every chunk can source
        short = sum(want.values()) - len(questions)
        if short and want["single-hop"] and card.kept["single-hop"] == want["single-hop"]:
            card.notes.append(f"{draw('single-hop', short)} single-hop question(s) written in place of the "
                              f"{short} the other kinds' gates rejected")
        # kinds mixed, so the first questions of the file (a --limit) hold every kind
        random.Random(self.seed).shuffle(questions)
        questions = [replace(q, id=f"{self.prefix}{number:04d}") for number, q in enumerate(questions, 1)]
        cost = self.runner.meter.total()
        card.generator, card.judge = self.runner.generator.name, self.runner.judge.name
        card.llm_calls, card.cache_hits, card.seconds = cost.llm_calls, cost.cache_hits, time.perf_counter() - started
        card.covered = len({d for q in questions for d in q.relevant_ids})
        card.question_words = [len(q.text.split()) for q in questions]
        card.overlap_target, card.overlap_from, card.overlap = self.overlap.target, self.overlap_source, \
            self.overlap.mean
        card.rewrites, card.styles, card.pooled = self.rewrites, self.styles, self.pooled
        card.styles_from = self.mix.describe()
        ranked = [q for q in questions if q.relevant_ids]
        if ranked:
            scores = np.stack([ndcg(self.runner, PipelineConfig(**knobs), ranked) for knobs in PROBE.values()], axis=1)
            card.discriminating, card.ranked = int(discriminating(scores).sum()), len(ranked)
        return questions, card


    def candidate(self, source: Source, turn: int = 0) -> Question:
        """One question written from `source` (`turn`: the candidate's number, which picks its style and length),
        rewritten into a user's words, or Rejected naming the gate it failed."""
        generator, judge = self.runner.generator, self.runner.judge
        chunks = source.chunks
        style, length = self.mix(turn)
        form = SEARCH if source.kind == "single-hop" and style == TOPIC else FORMS[source.kind]
        broad = self._neighbours(chunks[0]) if form.search and self.mix.breadth > 1 else ()
        form = BROAD_SEARCH if broad else form
        shown = (*chunks, *broad)
        # one chunk or two: the prompts of one source ignore the second's fields
        prompt = form.write.format(title=self._title(chunks[0]), text=_cut(chunks[0].text), asked=self._asked(chunks),
                                   title2=self._title(chunks[-1]), text2=_cut(chunks[-1].text), link=source.link,
                                   passages="\n\n".join(f"Document: {self._title(c)}\nPassage:\n{_cut(c.text)}"
                                                        for c in shown),
                                   style=STYLES.get(style, ""), length=length)
        written = _ask(generator, prompt, form.fields, first=form.notes)
        # a search names no one thing, as a question must: its subject is enough
        subjects = () if form.search else (*(self._title(c) for c in chunks), *self._specific(chunks))
        texts = [c.text for c in shown]  # a broad search copies from any of the passages it was written from
        # a draft no rewrite can save fails before one
        question = clean_question(written[form.fields[0]], subjects, search=form.search)
        question, overlap = self._reworded(question, texts, subjects, length, form)
        vector = self.runner.workspace.embedder.encode([question])[0]
        check_new(vector, self.kept_vectors)
        if source.kind == "unanswerable":
            found = self.runner.pipeline.run(question, PipelineConfig(top_k=UNANSWERED_TOP)).selected
            if _yes(judge, _ANSWERED.format(passages=_numbered([c.chunk.text for c in found]), question=question)):
                raise Rejected("answered by the corpus")
            answer, gold = UNANSWERABLE, ()
        else:
            answer = written["answer"]
            # the judge reads the rewritten question: a rewrite that lost what was asked is not kept
            supported = _yes(judge, form.supported.format(passage=_cut(texts[0]), passages=_numbered(texts),
                                                          question=question, answer=answer))
            if not supported:
                raise Rejected("unsupported by its source")
            if source.kind == "multi-hop" and any(_yes(judge, _ALONE.format(passage=_cut(t), question=question))
                                                  for t in texts):
                raise Rejected("one document suffices")
            gold = tuple(dict.fromkeys(c.doc_id for c in chunks))
            if source.kind == "single-hop":  # a broad search's other documents are judged as the pool's are
                gold += self._pooled(question, gold, form.pooled, source=texts[0], also=broad)
        self.kept_vectors.append(vector)
        self.overlap.keep(overlap)
        self.asked[chunks[0].id].append(question)
        self.styles[style if source.kind == "single-hop" else source.kind] += 1
        return Question(id="", text=question, answers=(answer,),
                        relevant_ids=frozenset(gold), kind=source.kind,
                        contexts=tuple(c.text for c in chunks))

    def _reworded(self, question: str, texts: list[str], subjects: tuple[str, ...], length: str,
                  form: Form) -> tuple[str, float]:
        """The question rewritten away from its source's wording (the generator not shown the source), and its
        lexical overlap with the source. Over the gate's target, it is rewritten once more, told which of the
        source's words to avoid; then it passes if the kept set's mean stays at the target, else
        Rejected("copies its source")."""
        avoid = ""
        for again in (False, True):
            reply = _ask(self.runner.generator, form.rewrite.format(question=question, length=length, avoid=avoid),
                         ("question",))
            question = clean_question(reply["question"], subjects, search=form.search)
            overlap = lexical_overlap(question, texts)
            if self.overlap.passes(overlap) if again else overlap <= self.overlap.target:
                return question, overlap
            if not again:
                self.rewrites += 1
                named = content_words(" ".join(subjects[:len(texts)]))  # its sources' titles: a question may name them
                copied = sorted(content_words(question) & content_words(" ".join(texts)) - named)
                avoid = _AVOID.format(words=", ".join(copied)) if copied else ""
        raise Rejected("copies its source", f"overlap {overlap:.2f} over {self.overlap.target:.2f}")

    def _pooled(self, question: str, gold: tuple[str, ...], judged: str, source: str,
                also: Sequence[Chunk] = ()) -> tuple[str, ...]:
        """The other documents whose chunks in the pool (each POOL search's top POOL_DEPTH, and `also`) the judge
        finds answer the question alone (`judged`: _ALONE), or serve the topic search (_ABOUT), nearly as surely as
        its `source` passage does (NEAR_SOURCE)."""
        pool: dict[str, list[str]] = defaultdict(list)
        found = [scored.chunk for search in POOL for scored in self.runner.pipeline.run(
            question, PipelineConfig(top_k=POOL_DEPTH, **search)).selected]
        for chunk in (*found, *also):
            if chunk.doc_id not in gold and chunk.text not in pool[chunk.doc_id]:
                pool[chunk.doc_id].append(chunk.text)
        if not pool:  # every search found only gold: the source's judgement would be paid for nothing
            return ()
        judge = self.runner.judge
        bar = max(YES, _p_yes(judge, judged.format(passage=_cut(source), question=question)) - NEAR_SOURCE)
        added = tuple(doc for doc, texts in pool.items()
                      if any(_p_yes(judge, judged.format(passage=_cut(t), question=question)) > bar for t in texts))
        self.pooled += len(added)
        return added

    def _neighbours(self, chunk: Chunk) -> tuple[Chunk, ...]:
        """The chunks of the documents nearest `chunk` by the default search (one each, other documents than its
        own), as many as a broad search is written from besides it."""
        found = self.runner.pipeline.run(_cut(chunk.text), PipelineConfig(top_k=NEIGHBOURS_TOP)).selected
        nearest: dict[str, Chunk] = {}
        for scored in found:
            if scored.chunk.doc_id != chunk.doc_id:
                nearest.setdefault(scored.chunk.doc_id, scored.chunk)
        return tuple(nearest.values())[:self.mix.breadth - 1]

    def _asked(self, chunks: tuple[Chunk, ...]) -> str:
        """For a chunk that already gave questions: them, and the request for another fact."""
        before = self.asked[chunks[0].id]
        return ("\nQuestions already asked about this passage — ask about a different fact:\n"
                + "".join(f"- {q}\n" for q in before)) if before else ""

    def _title(self, chunk: Chunk) -> str:
        return self.titles.get(chunk.doc_id) or chunk.doc_id

    def _specific(self, chunks: tuple[Chunk, ...]) -> set[str]:
        return {w for c in chunks for w in _words(c.text) if self.chunk_count[w] <= self.specific_below}


def ndcg(runner: RagRunner, config: PipelineConfig, questions: Sequence[Question]) -> np.ndarray:
    """Each question's nDCG@10 under `config`'s retrieval (no answer, no LLM call)."""
    result = runner.evaluate(config, questions=questions, answer=False)
    return np.array([q.retrieval.metrics["ndcg@10"] for q in result.questions])


def _words(text: str) -> list[str]:
    return re.findall(r"\w{4,}", text.lower())


def _cut(text: str) -> str:
    return text if len(text) <= CHUNK_CHARS else text[:CHUNK_CHARS] + " …"


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"[{i}] {_cut(t)}" for i, t in enumerate(texts, 1))


def _ask(generator: LLM, prompt: str, fields: tuple[str, ...], first: tuple[str, ...] = ()) -> dict[str, str]:
    """The generator's JSON reply to `prompt` with `fields` (strings), or Rejected("unparsable"). `first`: fields a
    schema-following model writes before them (its notes: the topic, the fact), not needed in the reply."""
    asked = (*first, *fields)
    schema = {"type": "object", "required": list(asked), "properties": {f: {"type": "string"} for f in asked}}
    reply = generator.chat([{"role": "system", "content": _SYSTEM}, {"role": "user", "content": prompt}],
                           max_tokens=WRITE_TOKENS, json_schema=schema).text
    return parse_reply(reply, fields)


def _p_yes(judge: LLM, prompt: str) -> float:
    probability = float(judge.yes_probability([{"role": "user", "content": prompt}]).text)
    return 0.0 if math.isnan(probability) else probability  # a reply saying neither yes nor no is no yes


def _yes(judge: LLM, prompt: str) -> bool:
    return _p_yes(judge, prompt) > YES
