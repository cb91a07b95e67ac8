"""Anchor questions a person wrote, and the test set's agreement with them: rank agreement and its interval, the
people-to-people yardstick, anchor files checked against the corpus, question styles read from people's words,
and searches written from the anchors' own form."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from tests.writers import PoolingLLM, WriterLLM, anchors_file, as_files, demo_as_files
from tuner.config import ProjectConfig
from tuner.data import DEMO_PATH, Question, load_dataset
from tuner.errors import DataError
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.llms import Completion
from tuner.models.provider import Models
from tuner.testset import read_scorecards
from tuner.testset.anchors import AnchorCheck, check_anchors, read_anchors
from tuner.testset.generate import QuestionWriter
from tuner.testset.styles import WIDEST, StyleMix, style_of
from tuner.workspace import open_workspace


def test_rank_agreement_finds_the_order_two_sets_share_and_says_how_sure_it_is():
    from tuner.testset.validity import lexical_overlap, rank_agreement

    rng = np.random.default_rng(0)
    quality = np.linspace(0.3, 0.8, 8)  # eight configurations, clearly ordered
    human = quality + rng.normal(0, 0.1, (200, 8))
    same = quality + rng.normal(0, 0.1, (150, 8))
    agreement = rank_agreement(human, same, resamples=300)
    assert agreement.tau > 0.8 and agreement.ci[0] > 0.5 and agreement.best_human == agreement.best_synthetic == 7
    assert agreement.tied_synthetic == ()  # 0.07 apart on 150 questions: the best is told from the next
    close = np.append(quality, 0.795) + rng.normal(0, 0.1, (150, 9))  # a ninth configuration 0.005 behind the best
    assert set(rank_agreement(np.append(human, human[:, -1:], axis=1), close, resamples=300).tied_synthetic) \
        == {7, 8} - {int(np.argmax(close.mean(axis=0)))}
    reversed_ = rank_agreement(human, quality[::-1] + rng.normal(0, 0.1, (150, 8)), resamples=300)
    assert reversed_.tau < -0.8 and reversed_.best_synthetic == 0
    assert reversed_.human_of_best_synthetic < reversed_.human_of_best_human - 0.3  # what the wrong set costs
    few = rank_agreement(human[:, :3] * 0 + rng.normal(0, 0.1, (200, 3)), rng.normal(0, 0.1, (5, 3)),
                         resamples=300)
    assert few.ci[1] - few.ci[0] > 1.0  # five questions and no real order: the interval says it knows nothing
    with pytest.raises(ValueError):
        rank_agreement(human, same[:, :5])
    assert lexical_overlap("Where is Port Ardent built?", ["Port Ardent is built around a harbour."]) == 1.0
    assert lexical_overlap("Which ferry runs to Halvard?", ["Port Ardent is built around a harbour."]) == 0.0


def test_split_halves_say_how_well_people_agree_with_people_so_a_tau_can_be_read_against_it():
    from tuner.testset.validity import split_halves

    rng = np.random.default_rng(1)
    quality = np.linspace(0.3, 0.8, 8)
    human = quality + rng.normal(0, 0.1, (100, 8))
    clear = split_halves(human, quality + rng.normal(0, 0.1, (80, 8)), splits=200)
    assert clear.half == 50 and clear.human > 0.8 and clear.synthetic > 0.8
    backwards = split_halves(human, quality[::-1] + rng.normal(0, 0.1, (80, 8)), splits=200)
    assert backwards.synthetic < -0.8 and backwards.human == clear.human  # the same splits of the same people
    # configurations a tenth of the noise apart: halves of the people's questions themselves disagree
    blurred = split_halves(np.linspace(0.5, 0.51, 8) + rng.normal(0, 0.1, (60, 8)), rng.normal(0, 0.1, (10, 8)),
                           splits=200)
    assert blurred.half == 10 and blurred.human < 0.5 and blurred.human_range[0] < 0 < blurred.human_range[1]
    with pytest.raises(ValueError):
        split_halves(human[:3], human)


def test_anchors_that_many_documents_serve_get_searches_written_from_the_nearest_documents_together(
        demo_copy, tmp_path, fake_embedder):
    llm = SearchPhraseLLM(leaning="")
    llm.drafts = []
    dataset = load_dataset(demo_copy, require_questions=False)
    workspace = open_workspace(ProjectConfig(cache_dir=tmp_path / "cache"), dataset=dataset, embedder=fake_embedder)
    ids = frozenset(d.id for d in dataset.documents[:5])  # each anchor served by five documents
    mix = StyleMix.of([Question("a", "MEASUREMENT OF PLASMA TEMPERATURES IN ARC DISCHARGE", relevant_ids=ids)] * 5)
    questions, card = QuestionWriter(RagRunner(workspace, models=Models(llm, llm)), dataset, mix=mix).write(
        3, {"single-hop": 1})
    assert len(questions) == 3 and len(llm.drafts) >= 3
    for draft in llm.drafts:  # its source and the two nearest other documents, named first to last
        shown = re.findall(r"^Document: (.+)$", draft, re.M)
        assert len(shown) == WIDEST == len(set(shown)) and "the subject they share" in draft
    sources = {re.findall(r"^Document: (.+)$", d, re.M)[0] for d in llm.drafts}
    assert all(q.relevant_ids & {d.id for d in dataset.documents if d.title in sources} for q in questions)
    assert card.to_json()["styles_from"].endswith(f"topic searches from {WIDEST} documents")


@pytest.mark.parametrize("rows, message", [
    ([{"documents": ["velmora"]}], 'line 1 has no "question"'),
    ([{"question": "Where?", "documents": []}], 'line 1 has no "documents"'),
    ([{"question": "Where?", "documents": ["atlantis"]}], "names document 'atlantis', which the corpus does not hold"),
    ([{"question": "Where?", "documents": ["velmora"]}] * 3, "3 anchor question(s); give at least 5"),
])
def test_anchor_files_are_checked_against_the_corpus(tmp_path, rows, message):
    path = tmp_path / "anchors.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as raised:
        read_anchors(path, load_dataset(DEMO_PATH).documents)
    assert message in str(raised.value)
    with pytest.raises(DataError, match="no such file"):
        read_anchors(tmp_path / "missing.jsonl", [])


def test_an_anchor_check_trusts_a_set_that_ranks_as_the_anchors_do_and_says_so_when_it_does_not():
    from tuner.data import Document, Question

    documents = [Document(d, f"{d} text", d) for d in "abc"]
    ours = [Question(f"g{i}", "What is a?", relevant_ids=frozenset({"a"})) for i in range(20)]
    theirs = [Question(f"h{i}", "Which one is b?", relevant_ids=frozenset({"b"})) for i in range(10)]
    rng = np.random.default_rng(0)
    quality = {"keyword": 0.2, "hybrid": 0.5, "vector": 0.7, "stemmed": 0.9}

    def score(config, asked, flip=False):
        level = quality[config] if not (flip and asked[0].id.startswith("h")) else 1 - quality[config]
        return np.clip(level + rng.normal(0, 0.05, len(asked)), 0, 1)

    agreeing = check_anchors(score, {k: k for k in quality}, ours, theirs, documents)
    assert agreeing.trusted and agreeing.tau == 1.0 and agreeing.ci[0] > 0.5
    assert agreeing.best_by_anchors == agreeing.best_by_generated == "stemmed"
    assert "rank configurations like your anchor questions" in agreeing.sentence()
    assert agreeing.tied_with == () and "cannot tell" not in agreeing.sentence()
    assert AnchorCheck.from_json(json.loads(json.dumps(agreeing.to_json()))) == agreeing
    reversed_ = check_anchors(lambda c, a: score(c, a, flip=True), {k: k for k in quality}, ours, theirs, documents)
    assert not reversed_.trusted and reversed_.tau == -1.0
    said = reversed_.sentence()
    assert said.startswith("**The generated questions rank configurations unlike your anchor questions**")
    assert "τ -1.00" in said.replace("−", "-") and "The anchors' best is keyword, the generated set's stemmed" in said
    quality["vector"] = 0.9  # as good as stemming on both sets: the generated questions cannot choose between them
    close = check_anchors(score, {k: k for k in quality}, ours, theirs, documents)
    assert close.tied_with == (({"vector", "stemmed"} - {close.best_by_generated}).pop(),)
    assert (f"The generated questions cannot tell their best, {close.best_by_generated}, from {close.tied_with[0]} "
            f"(the 95 % interval of the difference reaches 0)") in close.sentence()
    assert AnchorCheck.from_json(json.loads(json.dumps(close.to_json()))) == close
    tied = check_anchors(lambda c, a: np.ones(len(a)), {k: k for k in quality}, ours, theirs, documents)
    assert tied.tau is None and "τ needs 3 that differ" in tied.sentence()


def test_a_docs_study_with_anchor_questions_reports_tau_and_its_interval(cli_with, tmp_path):
    invoke = cli_with(WriterLLM())
    demo_as_files(tmp_path / "manuals")
    anchors_file(tmp_path / "anchors.jsonl", ids=as_files)
    result = invoke("optimize", "--docs", "manuals", "--anchor-questions", "anchors.jsonl", "--target", "ndcg@10",
                    "--search-space", "retrieval", "--trials", "6", "--judge-check", "off", "--study", "anchored")
    assert result.exit_code == 0, result.output
    assert "10 anchor questions" in result.output and "Kendall τ" in result.output
    [dataset] = (tmp_path / "studies" / "datasets").iterdir()
    card = read_scorecards(dataset)[-1]
    assert card["overlap"]["from"] == "the mean of 10 real question(s)"  # the anchors set the gate's target
    assert card["styles_from"].startswith("the anchors' styles (what ")  # ... and the styles asked
    report = (tmp_path / "reports" / "anchored" / "report.md").read_text()
    section = report.split("## Test set", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"Kendall τ [+-]\d\.\d\d \[[+-]\d\.\d\d, [+-]\d\.\d\d\] between the rankings of \d+ "
                     r"configurations by the \d+ generated questions and by your 10 anchor questions", section)
    assert "lexical overlap with their sources" in section and "separate keyword, hybrid and vector search" in section
    assert re.search(r"On this study's \d+ complete trials, \d+ of \d+ search questions", section)
    distrusted = "**The generated questions rank configurations unlike your anchor questions**" in section
    assert report.split("\n", 3)[2].startswith("**The generated") == distrusted  # said first when it disagrees
    bad = invoke("optimize", "--docs", "manuals", "--anchor-questions", "nowhere.jsonl", "--study", "x")
    assert bad.exit_code != 0 and "--anchor-questions nowhere.jsonl: no such file" in str(bad.exception)


@pytest.mark.parametrize("question, style", [
    ("In what country is Normandy located?", "what"), ("which method of forecasting uses averages", "what"),
    ("Why did the Normans adopt French?", "why"), ("how long do refunds take", "how"),
    ("difference between russian blue and british blue cat", "compare"), ("Is Velmora open in winter?", "yes-no"),
    ("MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES", "topic"),
])
def test_a_persons_question_style_is_read_from_its_words(question, style):
    assert style_of(question) == style


def test_styles_come_in_turn_or_in_the_anchors_shares_at_their_length():
    alone = StyleMix()
    assert [alone(t)[0] for t in range(6)] == ["what", "why", "how", "compare", "yes-no", "what"]
    assert alone(0)[1] != alone(5)[1]  # both lengths, each style in each
    people = [Question("a", "SYSTEMS OF DATA CODING FOR INFORMATION TRANSFER", relevant_ids=frozenset({"d1"}))] * 3
    mix = StyleMix.of([*people, Question("b", "Why do arcs form?", relevant_ids=frozenset({"d2"}))])
    turns = [mix(t) for t in range(8)]
    assert Counter(style for style, _ in turns) == {"topic": 6, "why": 2}  # their shares in every run of 4
    assert {length for _, length in turns} == {"about 7 words"}  # the anchors' median
    assert mix.describe() == "the anchors' styles (topic 3, why 1) at about 7 words" and mix.breadth == 1
    # searches that many documents serve are written from several, up to WIDEST
    broad = StyleMix.of([replace(q, relevant_ids=frozenset(f"d{i}" for i in range(20))) for q in people])
    assert broad.breadth == WIDEST and broad.describe().endswith(f"topic searches from {WIDEST} documents")
    assert StyleMix.of([replace(people[0], relevant_ids=frozenset({"d1", "d2"}))]).breadth == 2


class SearchPhraseLLM(PoolingLLM):
    """Writes a search phrase when asked for one (and rewrites it as it was); judges a passage about a search's
    subject to serve it."""

    rewrites: list[str] = []
    drafts: list[str] = []

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        prompt = messages[-1]["content"]
        if "into a library catalogue's search box:" in prompt:  # the rewrite of a search
            self._pay()
            self.rewrites.append(prompt)
            return Completion(json.dumps({"question": prompt.split("search box:\n", 1)[1].split("\n", 1)[0]}), 20, 9)
        if "library catalogue's search box to find" in prompt:
            self._pay()
            self.drafts.append(prompt)
            title = re.search(r"Document: (.+)", prompt).group(1)
            reply = {"topic": title, "search": f"{title} opening hours and seasons?", "answer": "Spring."}
            return Completion(json.dumps(reply), 40, 12)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)

    def yes_probability(self, messages, reuse_prefix=False):
        prompt = messages[-1]["content"]
        if "Is this passage about what this search asks for?" not in prompt:
            return super().yes_probability(messages, reuse_prefix)
        self._pay()
        subject = re.search(r"Search: (.+) opening hours", prompt).group(1)
        return Completion("0.9" if subject in prompt.split("\n\nSearch:", 1)[0] else "0.1", 30, 0)


def test_anchors_that_search_by_topic_get_search_phrases_judged_and_pooled_as_searches(demo_copy, tmp_path,
                                                                                       fake_embedder):
    llm = SearchPhraseLLM(leaning="")
    dataset = load_dataset(demo_copy, require_questions=False)
    workspace = open_workspace(ProjectConfig(cache_dir=tmp_path / "cache"), dataset=dataset, embedder=fake_embedder)
    mix = StyleMix.of([Question("a", "MEASUREMENT OF PLASMA TEMPERATURES IN ARC DISCHARGE",
                                relevant_ids=frozenset({"d"}))] * 5)
    writer = QuestionWriter(RagRunner(workspace, models=Models(llm, llm)), dataset, mix=mix)
    questions, card = writer.write(4, {"single-hop": 1})
    assert len(questions) == 4 and all(q.text.endswith(" opening hours and seasons") for q in questions)
    assert len(llm.rewrites) >= 4 and all("not a question" in p for p in llm.rewrites)  # rewritten as a search
    assert all("opening hours and seasons\n" in p for p in llm.rewrites)  # given as a search: its "?" dropped
    assert card.styles == {"topic": 4} and card.to_json()["styles_from"].startswith("the anchors' styles (topic 5)")
    assert card.pooled and card.pooled == sum(len(q.relevant_ids) - 1 for q in questions)
    documents = {d.id: d for d in dataset.documents}
    for q in questions:  # gold pooled by the search judge: every document but the source is about its subject
        subject = q.text.removesuffix(" opening hours and seasons")
        assert all(subject in documents[d].text for d in q.relevant_ids if documents[d].title != subject)
