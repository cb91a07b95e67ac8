"""`tuner data generate`: the quality gates on hand-written bad questions, the writer's plumbing with scripted
models (kinds, gold ids, scorecard, resume without paying twice, gold by pooling), and the real 0.5B end to end on
the demo (anchor questions: tests/test_anchors.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.helpers import one_line_error, tuner
from tests.writers import REWRITE, PoolingLLM, WriterLLM, anchors_file, as_files, demo_as_files, rewritten, writer_on
from tuner.config import ProjectConfig
from tuner.data import DEMO_PATH, Question, load_dataset
from tuner.data.beir import write_questions
from tuner.errors import DataError
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.llms import Completion
from tuner.models.provider import Models
from tuner.pipeline.chunking import Chunk
from tuner.testset import generate_testset, read_scorecards
from tuner.testset.gates import OverlapGate, Rejected, check_new, clean_question, parse_reply
from tuner.testset.generate import _ALONE, UNANSWERABLE, linked_pairs, spread, targets
from tuner.testset.validity import DEFAULT_OVERLAP, discriminating, overlap_target
from tuner.workspace import open_workspace


@pytest.mark.parametrize("written, cleaned", [
    ("Here is a question: Where is Port Ardent?", "Where is Port Ardent?"),
    ("Sure! Question 1: Who founded Velmora?", "Who founded Velmora?"),
    ("Q: When is the Harbour Festival held?", "When is the Harbour Festival held?"),
    ("1. What does the island of Velmora export", "What does the island of Velmora export?"),
])
def test_preambles_and_numbering_are_stripped(written, cleaned):
    assert clean_question(written) == cleaned


@pytest.mark.parametrize("written, gate", [
    ("Here are three questions about Velmora:", "preamble or list"),
    ("1. Where is Port Ardent?\n2. Who founded it?", "preamble or list"),
    ("Where is Port Ardent? And who founded it?", "preamble or list"),
    ("According to the passage, when was the town hall built?", "not standalone"),
    ("What does the text say about kelp farming?", "not standalone"),
    ("Which festival is mentioned in this excerpt?", "not standalone"),
    ("What is the subject of the guide?", "not standalone"),  # about the document, not what it tells
    ("What is the name of the airport?", "not standalone"),  # which airport? it names nothing
    ("Why?", "length"),
    ("", "length"),
])
def test_bad_questions_are_rejected_by_their_gate(written, gate):
    """Hand-written bad questions of the kinds other generators' users complain of, each caught by its gate."""
    with pytest.raises(Rejected) as rejected:
        clean_question(written, ("Velmora Airport",) if "airport" not in written else ("Transport",))
    assert rejected.value.gate == gate


@pytest.mark.parametrize("question", ["How long is the runway of the airport?", "Which airports fly to Halvard?",
                                      "What happened in 1907?"])
def test_a_question_naming_a_title_word_a_name_or_a_number_is_standalone(question):
    assert clean_question(question, ("Airport",)) == question


def test_replies_parse_or_are_rejected_and_near_duplicates_are_caught():
    assert parse_reply('Sure: {"question": "Where?", "answer": " In  the east. "}', ("question", "answer")) == {
        "question": "Where?", "answer": "In the east."}
    for bad in ("no json here", '["a list"]', '{"question": "Where?"}'):
        with pytest.raises(Rejected, match="unparsable"):
            parse_reply(bad, ("question", "answer"))
    a, b = np.array([1.0, 0.0]), np.array([0.8, 0.6])
    check_new(b, [a])  # cosine 0.8: a different question
    with pytest.raises(Rejected, match="near-duplicate"):
        check_new(np.array([0.95, np.sqrt(1 - 0.95 ** 2)]), [a])


def test_shares_round_to_the_count_asked_and_sources_spread_over_documents():
    assert targets(10, {"single-hop": 0.6, "multi-hop": 0.25, "unanswerable": 0.15}) == {
        "single-hop": 6, "multi-hop": 3, "unanswerable": 1}
    assert sum(targets(7, {"single-hop": 1, "multi-hop": 1, "unanswerable": 1}).values()) == 7
    with pytest.raises(DataError):
        targets(5, {"single-hop": 0})
    chunks = [Chunk(f"{d}#{n}", d, f"text {d} {n}") for d, count in (("big", 20), ("a", 2), ("b", 1)) for n in
              range(count)]
    first = spread(chunks, seed=3)[:6]
    assert {c.doc_id for c in first[:3]} == {"big", "a", "b"}  # every document before any repeats
    assert sum(c.doc_id == "big" for c in first) == 3  # then the big one only as its share allows
    assert spread(chunks, seed=3) == spread(chunks, seed=3) != spread(chunks, seed=4)


def test_linked_pairs_join_a_title_named_elsewhere_and_a_name_two_documents_share():
    chunks = [Chunk("v#0", "v", "Velmora\nIts capital is Port Ardent."),
              Chunk("p#0", "p", "Port Ardent\nA harbour town."),
              Chunk("x#0", "x", "Kelp\nFarmed by Ilsa Marrow since 1990."),
              Chunk("y#0", "y", "Boats\nIlsa Marrow also builds boats.")]
    pairs = linked_pairs(chunks, {"v": "Velmora", "p": "Port Ardent", "x": "Kelp", "y": "Boats"}, seed=0)
    found = {(frozenset(c.doc_id for c in p.chunks), p.link) for p in pairs}
    assert found == {(frozenset("vp"), "Port Ardent"), (frozenset("xy"), "Ilsa Marrow")}


def test_the_writer_makes_every_kind_counts_every_gate_and_resumes_without_paying_twice(demo_copy, tmp_path,
                                                                                         fake_embedder):
    llm = WriterLLM()
    questions, card = writer_on(demo_copy, llm, tmp_path / "cache", fake_embedder).write(
        8, {"single-hop": 0.5, "multi-hop": 0.25, "unanswerable": 0.25})
    kinds = {q.kind for q in questions}
    assert kinds == {"single-hop", "multi-hop", "unanswerable"} and len(questions) == 8
    for q in questions:
        assert q.text.endswith("?") and q.id.startswith("gen-")
        if q.kind == "unanswerable":
            assert not q.relevant_ids and q.answers == (UNANSWERABLE,)
        else:
            assert len(q.relevant_ids) == (2 if q.kind == "multi-hop" else 1) and q.contexts
    assert card.rejected["not standalone"] >= 1  # the leaning questions
    assert card.kept == {"single-hop": 4, "multi-hop": 2, "unanswerable": 2}
    assert card.covered >= 5 and card.llm_calls == llm.paid and card.cache_hits == 0
    # a Ctrl-C part-way, then the same run again: the calls paid before the stop are not paid again
    stopped = WriterLLM(stop_after=llm.paid // 2)
    with pytest.raises(KeyboardInterrupt):
        writer_on(demo_copy, stopped, tmp_path / "cache2", fake_embedder).write(
            8, {"single-hop": 0.5, "multi-hop": 0.25, "unanswerable": 0.25})
    resumed = WriterLLM()
    again, card2 = writer_on(demo_copy, resumed, tmp_path / "cache2", fake_embedder).write(
        8, {"single-hop": 0.5, "multi-hop": 0.25, "unanswerable": 0.25})
    assert resumed.paid == llm.paid - stopped.paid and card2.cache_hits == stopped.paid
    assert [q.text for q in again] == [q.text for q in questions]


def test_a_small_corpus_is_gone_round_again_asking_each_chunk_for_another_fact(tmp_path, fake_embedder):
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        '{"_id": "a", "title": "Port Ardent", "text": "Port Ardent is the capital of Velmora. Its town hall was '
        'completed in 1887."}\n{"_id": "b", "title": "Kestrel Bay", "text": "Kestrel Bay is a fishing village on the '
        'west coast, where Ilsa Marrow was born."}\n')
    questions, card = writer_on(folder, WriterLLM(leaning=""), tmp_path / "cache", fake_embedder).write(
        4, {"single-hop": 1.0})
    assert len(questions) == 4 and card.kept["single-hop"] == 4
    assert sum("largest change" in q.text for q in questions) == 2  # each chunk asked again, for another fact
    with pytest.raises(DataError, match="at most 3 questions come from one chunk"):
        writer_on(folder, WriterLLM(), tmp_path / "cache", fake_embedder).write(7, {"single-hop": 1.0})
    # single-hop candidates all rejected use up every round of the stream: unanswerable ones still get theirs
    questions, card = writer_on(folder, WriterLLM(leaning="KP"), tmp_path / "cache2", fake_embedder).write(
        4, {"single-hop": 0.5, "unanswerable": 0.5})
    assert card.drawn["single-hop"] == 6 and card.kept["single-hop"] == 0
    assert card.kept["unanswerable"] == 2 and [q.kind for q in questions] == ["unanswerable"] * 2


class TopicalLLM(WriterLLM):
    """Asks about a topic, with no name or number in the question, as a model does of untitled abstracts."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        self._pay()
        specific = "ferroxcube" in messages[-1]["content"]
        question = "What limits how much power ferroxcube cores give?" if specific else \
            "What is the maximum power output of the cores?"
        return Completion(json.dumps({"question": question, "answer": "Losses."}), 40, 12)


def test_an_untitled_corpus_keeps_questions_naming_a_word_few_chunks_use(tmp_path, fake_embedder):
    folder = tmp_path / "abstracts"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        '{"_id": "a", "title": "", "text": "Losses in ferroxcube cores limit the power output at centimetre '
        'wavelengths."}\n{"_id": "b", "title": "", "text": "The power output of cores rises with their size."}\n')
    questions, card = writer_on(folder, TopicalLLM(), tmp_path / "cache", fake_embedder).write(2, {"single-hop": 1})
    assert [q.text for q in questions] == ["What limits how much power ferroxcube cores give?"]
    assert card.rejected["not standalone"] >= 1  # "the cores": words every chunk uses name nothing


def test_questions_a_kinds_gates_reject_are_written_as_single_hop_ones_and_said(demo_copy, tmp_path, fake_embedder):
    questions, card = writer_on(demo_copy, WriterLLM(leaning="", answers_all=True), tmp_path / "cache",
                                fake_embedder).write(4, {"single-hop": 0.5, "unanswerable": 0.5})
    assert card.rejected["answered by the corpus"] == 6 and card.kept["unanswerable"] == 0
    assert len(questions) == 4 and card.kept["single-hop"] == 4
    assert "2 single-hop question(s) written in place of the 2 the other kinds' gates rejected" in card.notes


def test_generate_writes_a_dataset_the_loader_reads_and_refuses_to_overwrite_questions(demo_copy, tmp_path,
                                                                                      fake_embedder, monkeypatch):
    monkeypatch.setattr("tuner.models.provider.make_llm", lambda config: WriterLLM())
    monkeypatch.setattr("tuner.workspace.make_embedder", lambda *args, **kwargs: fake_embedder)
    config = ProjectConfig(cache_dir=tmp_path / "cache")
    made = generate_testset(config, demo_copy, 5)
    data = load_dataset(demo_copy)
    assert len(data.questions) == made.total == 5 and {q.kind for q in data.questions} >= {"single-hop"}
    assert all(q.relevant_ids for q in data.questions if q.kind != "unanswerable")
    assert read_scorecards(demo_copy)[-1]["kept"] == made.scorecard["kept"]
    with pytest.raises(DataError, match="already holds 5 questions"):
        generate_testset(config, demo_copy, 3)
    appended = generate_testset(config, demo_copy, 3, mode="append", seed=1)
    data = load_dataset(demo_copy)
    assert appended.total == len(data.questions) == 8 and len({q.id for q in data.questions}) == 8
    assert len(read_scorecards(demo_copy)) == 2
    assert generate_testset(config, demo_copy, 2, mode="replace").total == 2
    with pytest.raises(DataError, match="at most"):
        generate_testset(config, demo_copy, 500, mode="replace")
    with pytest.raises(DataError, match="not a dataset folder"):
        generate_testset(config, tmp_path / "nowhere", 3)


def test_declining_an_unanswerable_question_is_not_scored_as_a_refusal(demo_copy, tmp_path, fake_embedder):
    """Under the default refusal rule a declined answerable question scores 0; a declined question the corpus does
    not answer (kind unanswerable) keeps the judge's word: declining was right. Its reference (a refusal) is no fact
    for context recall."""
    from tests.helpers import RefusesHardQuestions
    from tuner.config import EvaluationConfig

    write_questions(demo_copy, [
        Question("asked", "When was the Tollan Lighthouse first lit?", ("In 1903.",), frozenset({"tollan-lighthouse"})),
        Question("unanswerable", "How tall was the lighthouse keeper in 1950?", (UNANSWERABLE,), kind="unanswerable"),
    ])
    project = ProjectConfig(cache_dir=tmp_path, evaluation=EvaluationConfig(metrics=["faithfulness",
                                                                                   "context_recall"]))
    llm = RefusesHardQuestions()
    runner = RagRunner(open_workspace(project, dataset=load_dataset(demo_copy), embedder=fake_embedder),
                       models=Models(llm, llm))
    result = {q.id: q for q in runner.evaluate(project.pipeline).questions}
    assert result["asked"].refusal and result["unanswerable"].refusal
    assert result["asked"].failures["faithfulness"].reason == "refusal"
    assert "faithfulness" not in result["unanswerable"].failures or \
        result["unanswerable"].failures["faithfulness"].reason != "refusal"
    # its reference is a refusal, no fact to recall: context recall does not score it (nor call it an error)
    assert result["unanswerable"].failures["context_recall"].reason == "no_reference"
    assert "context_recall" not in result["asked"].failures


def test_bad_generate_input_is_one_line(demo_copy, tmp_path):
    one_line_error(tuner("data", "generate", "nowhere", "-n", "3", cwd=tmp_path), "not a dataset folder")
    one_line_error(tuner("data", "generate", str(demo_copy), "-n", "3", "--append", "--replace", cwd=tmp_path),
                   "choose one")
    one_line_error(tuner("data", "generate", str(demo_copy), "-n", "3", "--multi-hop", "0.8", "--unanswerable",
                         "0.5", cwd=tmp_path), "together ≤ 1")
    one_line_error(tuner("data", "generate", str(DEMO_PATH), "-n", "3", cwd=tmp_path), "already holds")


def test_optimize_docs_ingests_generates_once_and_resumes_on_the_same_questions(cli_with, tmp_path):
    llm = WriterLLM()
    invoke = cli_with(llm)
    demo_as_files(tmp_path / "manuals")
    args = ("optimize", "--docs", "manuals", "--target", "ndcg@10", "--search-space", "retrieval", "--trials", "2",
            "--judge-check", "off", "--study", "docs")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    [dataset] = (tmp_path / "studies" / "datasets").iterdir()
    assert dataset.name.startswith("manuals-") and "test set scorecard" in first.output
    questions = (dataset / "queries.jsonl").read_text()
    assert len(questions.splitlines()) >= 20  # 60 asked; the demo's 36 chunks support fewer, and say so
    paid = llm.paid
    again = invoke(*args[:-4], "--trials", "3", "--judge-check", "off", "--study", "docs")
    assert again.exit_code == 0, again.output
    assert llm.paid == paid and (dataset / "queries.jsonl").read_text() == questions  # nothing written again
    assert "test set scorecard" not in again.output
    clash = invoke("optimize", "--docs", "manuals", "--dataset", "x")
    assert clash.exit_code != 0 and "choose one" in str(clash.exception)


@pytest.mark.slow
def test_a_folder_of_files_becomes_a_checked_test_set_and_a_study_with_the_small_model(tmp_path, small_gguf):
    """For real: a folder of files ingested, three questions written and judged by the 0.5B, a retrieval study
    (real embedder) on them, checked against anchor questions people wrote."""
    demo_as_files(tmp_path / "manuals", count=12)
    anchors = anchors_file(tmp_path / "anchors.jsonl", ids=as_files, within=12)
    assert len(anchors.read_text().splitlines()) >= 5
    (tmp_path / "tuner.yaml").write_text(f"generator: {{model: qwen2.5-0.5b, path: {small_gguf}}}\n"
                                         f"judge: {{model: qwen2.5-0.5b, path: {small_gguf}}}\n"
                                         f"cache_dir: cache\n")
    assert tuner("data", "ingest", "manuals", "--out", "data", cwd=tmp_path).returncode == 0
    result = tuner("data", "generate", "data", "-n", "3", "--config", "tuner.yaml", "--anchor-questions",
                   "anchors.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    card = read_scorecards(tmp_path / "data")[-1]
    data = load_dataset(tmp_path / "data")
    assert 1 <= len(data.questions) <= 3 and sum(card["kept"].values()) == len(data.questions)
    assert sum(card["drawn"].values()) == sum(card["kept"].values()) + sum(card["rejected"].values())
    for q in data.questions:
        clean_question(q.text)  # what was kept passes the gates
        assert q.kind in ("single-hop", "multi-hop", "unanswerable")
        assert q.kind == "unanswerable" or q.relevant_ids <= {d.id for d in data.documents}
    assert "test set scorecard" in result.stdout and "test set scorecard" in tuner("data", "data", cwd=tmp_path).stdout
    assert card["overlap"]["from"].startswith("the mean of") and card["anchors"]["anchors"] >= 5
    assert card["discriminating"]["of"] == sum(1 for q in data.questions if q.relevant_ids)
    study = tuner("optimize", "--dataset", "data", "--config", "tuner.yaml", "--target", "ndcg@10", "--search-space",
                  "retrieval", "--trials", "4", "--judge-check", "off", "--anchor-questions", "anchors.jsonl",
                  cwd=tmp_path)
    assert study.returncode == 0, study.stderr
    report = (tmp_path / "reports" / "default" / "report.md").read_text()
    assert "## Test set" in report and "anchor questions" in report.split("## Test set", 1)[1]


def test_the_overlap_gate_holds_the_kept_mean_to_its_target_and_allows_some_close_wording():
    gate = OverlapGate(0.5)
    assert gate.passes(0.5) and not gate.passes(0.9)  # nothing kept yet: no slack to spend
    gate.keep(0.1), gate.keep(0.2)
    assert gate.passes(0.9) and gate.mean == pytest.approx(0.15)  # (0.1 + 0.2 + 0.9) / 3 = 0.4
    gate.keep(0.9)
    assert not gate.passes(1.0) and gate.passes(0.5)


def test_overlap_targets_come_from_real_questions_else_the_default():
    from tuner.data import Document

    documents = [Document("a", "Port Ardent is the capital of Velmora.", "Port Ardent")]
    real = [Question("1", "Which city governs Velmora?", relevant_ids=frozenset({"a"})),  # 1 of 3 words: 0.33
            Question("2", "What is the capital of Velmora?", relevant_ids=frozenset({"a"})),  # 2 of 2: 1.0
            Question("3", "How big is it?")]  # no gold: not counted
    assert overlap_target(real, documents) == (0.67, "the mean of 2 real question(s)")
    assert overlap_target([], documents) == (DEFAULT_OVERLAP, "the default (no real questions given)")


def test_a_question_is_discriminating_when_the_configurations_disagree_on_it():
    scores = np.array([[1.0, 1.0, 1.0], [1.0, 0.95, 0.92], [1.0, 0.5, 0.0], [0.3, 0.4, 0.2]])
    assert discriminating(scores).tolist() == [False, False, True, True]


class CopyingLLM(WriterLLM):
    """Drafts questions in the passage's own words and rewrites them unchanged — unless told which words to avoid
    (`obeys`), when it finds its own. `lose` questions: the rewrite loses what was asked, and the judge says so."""

    def __init__(self, obeys: bool = True, lose: bool = False):
        super().__init__(leaning="")
        self.obeys, self.lose, self.rewrites = obeys, lose, []

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        prompt = messages[-1]["content"]
        if REWRITE in prompt:
            self._pay()
            self.rewrites.append(prompt)
            question = rewritten(prompt)
            if "Do not use these words" in prompt and self.obeys:
                name = re.search(r"(?:about|of) ([A-Z][\w ]+?)\?", question).group(1)
                question = f"What should a visitor know about {name}?"
            elif self.lose:
                question = "Where is the lost key of Velmora?"
            return Completion(json.dumps({"question": question}), 20, 10)
        if "does NOT answer" in prompt or "Passage 1" in prompt:
            return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                 json_schema=json_schema)
        self._pay()
        title = re.search(r"Document: (.+)", prompt).group(1)
        passage = prompt.split("Passage:\n", 1)[1].split("\nA reader", 1)[0]
        copied = " ".join(max(passage.splitlines(), key=len).split()[:12]).rstrip(".,;")  # not a heading
        reply = {"topic": title, "fact": copied, "question": f"Is {copied} about {title}?", "answer": copied}
        return Completion(json.dumps(reply), 40, 12)

    def yes_probability(self, messages, reuse_prefix=False):
        if "lost key" in messages[-1]["content"]:
            self._pay()
            return Completion("0.1", 30, 0)
        return super().yes_probability(messages, reuse_prefix)


def test_questions_are_rewritten_away_from_their_sources_words_and_checked_again(demo_copy, tmp_path, fake_embedder):
    llm = CopyingLLM()
    questions, card = writer_on(demo_copy, llm, tmp_path / "cache", fake_embedder).write(5, {"single-hop": 1})
    assert len(questions) == 5 and card.rewrites >= 5  # every draft copied its passage: rewritten twice
    assert all(q.text.startswith("What should a visitor know about") for q in questions)
    # the first rewrite never sees the passage; the second is told the source's words the question reused
    first, second = llm.rewrites[:2]
    assert "Passage" not in first and "Do not use these words:" in second
    told = second.split("Do not use these words: ", 1)[1].split(".", 1)[0].split(", ")
    assert told and all(word.islower() and len(word) >= 4 for word in told)
    assert card.to_json()["overlap"]["kept"] <= card.overlap_target
    assert set(card.styles) == {"what", "why", "how", "compare", "yes-no"}  # one of each style asked, in turn
    # a model that will not reword: rejected by the gate, counted, nothing kept
    stubborn = CopyingLLM(obeys=False)
    kept, card = writer_on(demo_copy, stubborn, tmp_path / "cache2", fake_embedder).write(
        2, {"single-hop": 1}, at_most=True)
    assert not kept and card.rejected["copies its source"] == card.drawn["single-hop"] == 6
    # a rewrite that lost the question: the judge reads the rewritten one and rejects it
    lost = CopyingLLM(obeys=False, lose=True)
    kept, card = writer_on(demo_copy, lost, tmp_path / "cache3", fake_embedder).write(
        2, {"single-hop": 1}, at_most=True)
    assert not kept and card.rejected["unsupported by its source"] >= 1


def first_column(table: str) -> str:
    """A printed table's first column, its cells joined: a label the table wrapped over two lines reads whole."""
    return " ".join(line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│"))


def test_the_scorecard_counts_the_new_gates_and_the_discriminating_share_as_printed(demo_copy, tmp_path,
                                                                                    fake_embedder, cli_with):
    invoke = cli_with(CopyingLLM())
    result = invoke("data", "generate", str(demo_copy), "-n", "4", "--unanswerable", "0", "--multi-hop", "0")
    assert result.exit_code == 0, result.output
    card = read_scorecards(demo_copy)[-1]
    assert card["rewritten_twice"] == 4 and card["overlap"]["target"] == DEFAULT_OVERLAP
    assert card["discriminating"]["of"] == 4 and 0 <= card["discriminating"]["questions"] <= 4
    assert card["calls_per_question"] == round((card["llm_calls"] + card["cache_hits"]) / 4, 1) > 2
    for shown in ("lexical overlap with sources", "rewritten twice to get under it", "styles kept", "pooling",
                  "question styles in turn",
                  "discriminating (nDCG@10 spread ≥ 0.1 over 3", "LLM calls per kept question"):
        assert shown in result.output or shown in first_column(result.output), result.output


def test_a_questions_gold_is_completed_by_pooling_keyword_and_vector_search(demo_copy, tmp_path, fake_embedder):
    llm = PoolingLLM(leaning="")
    writer = writer_on(demo_copy, llm, tmp_path / "cache", fake_embedder)
    pipeline, searched = writer.runner.pipeline, []
    run = pipeline.run
    pipeline.run = lambda question, config, *a, **k: searched.append((config.alpha, config.fusion)) or run(
        question, config, *a, **k)
    questions, card = writer.write(6, {"single-hop": 1})
    # keyword search pooled plain and stemmed: the index a stemmed configuration searches is judged from too
    built = {settings.stemmer for settings, _ in writer.runner.pipeline.indexes.built}
    assert "english" in built
    # and hybrid search under both fusions: a document only a hybrid ranks high is judged, not counted a miss
    assert {(0.0, "relative_score"), (1.0, "relative_score"), (0.5, "relative_score"), (0.5, "ranked")} <= set(searched)
    texts = {d.id: d.text for d in load_dataset(demo_copy, require_questions=False).documents}
    pooled = [q for q in questions if len(q.relevant_ids) > 1]
    assert pooled and card.pooled == sum(len(q.relevant_ids) - 1 for q in questions)
    for q in pooled:  # every added document names the subject (the judge's rule); the source stays gold
        subject = re.search(r"about (.+)\?", q.text).group(1)
        assert all(subject in texts[d] for d in q.relevant_ids)
    assert card.to_json()["pooled_gold"] == card.pooled


class GradedJudgeLLM(WriterLLM):
    """Judges with a P(yes) per passage: the first of `grades` (a word the passage holds -> P) that it holds, else
    0.1."""

    def __init__(self, grades: dict[str, float]):
        super().__init__(leaning="")
        self.grades = grades

    def yes_probability(self, messages, reuse_prefix=False):
        self._pay()
        passage = messages[-1]["content"].split("Passage:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        return Completion(str(next((p for word, p in self.grades.items() if word in passage), 0.1)), 30, 0)


@pytest.mark.parametrize("source_yes, soft_yes_is_gold", [(0.97, False), (0.6, True)])
def test_a_pooled_document_is_gold_only_when_the_judge_is_nearly_as_sure_of_it_as_of_the_source(
        demo_copy, tmp_path, fake_embedder, source_yes, soft_yes_is_gold):
    # the source 0.97 or 0.6, the regatta's passage 0.9, a passage naming Port Ardent a soft yes (0.8)
    llm = GradedJudgeLLM({"August in Port Ardent": source_yes, "regatta": 0.9, "Port Ardent": 0.8})
    writer = writer_on(demo_copy, llm, tmp_path / "cache", fake_embedder)
    source = next(d.text for d in load_dataset(demo_copy, require_questions=False).documents
                  if d.id == "harbour-festival")
    added = set(writer._pooled("When is the Harbour Festival held in Port Ardent?", ("harbour-festival",),
                               _ALONE, source=source))
    assert "regatta" in added  # within NEAR_SOURCE of the source, or a yes over YES when the source is unsure
    soft = added - {"regatta"}
    assert bool(soft) == soft_yes_is_gold and writer.pooled == len(added)


