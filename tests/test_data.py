import json

import pytest

from tests.helpers import dataset_path
from tuner.data import DEMO_PATH, load_dataset
from tuner.data.ragas import context_id
from tuner.errors import DataError


def test_bundled_demo_has_references_gold_ids_and_multi_hop_questions():
    demo = load_dataset()
    assert demo.name == "demo" and demo.format == "beir"
    assert 30 <= len(demo.documents) <= 40 and 15 <= len(demo.questions) <= 25
    assert all(q.answers and q.relevant_ids for q in demo.questions)
    doc_ids = {d.id for d in demo.documents}
    assert all(q.relevant_ids <= doc_ids for q in demo.questions)
    assert sum(len(q.relevant_ids) > 1 for q in demo.questions) >= 5
    assert DEMO_PATH.is_dir()


def test_beir_squad_normans():
    data = load_dataset(dataset_path("squad2_dev_normans"))
    assert (data.format, len(data.documents), len(data.questions)) == ("beir", 39, 208)
    answerable = [q for q in data.questions if q.relevant_ids]
    assert len(answerable) == 96
    first = data.questions[0]
    assert first.text == "In what country is Normandy located?" and first.answers[0] == "France"
    assert first.relevant_ids == {"Normans_00"}


@pytest.mark.parametrize(
    "name, documents, questions, with_gold",
    [("clapnq_dev", 593, 300, 300), ("cmu_qa_wikipedia_v1.2", 135, 2462, 2462), ("vaswani_npl", 11429, 93, 93),
     ("autorag_eli5_sample", 30, 10, 10)],
)
def test_beir_sets(name, documents, questions, with_gold):
    data = load_dataset(dataset_path(name))
    assert len(data.documents) == documents and len(data.questions) == questions
    assert sum(bool(q.relevant_ids) for q in data.questions) == with_gold


def test_autorag_inline_retrieval_gt_and_generation_gt():
    data = load_dataset(dataset_path("autorag_eli5_sample"))
    q = data.questions[0]
    assert q.relevant_ids == {"5b957791-3c7b-4f29-a410-8d005a538855"}
    assert q.reference.startswith("Keep the defense honest")


def test_ragas_folder_picks_the_file_named_after_it():
    data = load_dataset(dataset_path("amnesty_qa"))
    assert data.format == "ragas" and data.source.name == "amnesty_qa.jsonl"
    assert len(data.questions) == 20 and all(q.answers for q in data.questions)
    assert not data.has_gold_ids and data.notes
    assert len({d.id for d in data.documents}) == len(data.documents) > 20


def test_ragas_column_json_and_promptflow_jsonl_agree_on_contexts():
    folder = dataset_path("amnesty_qa")
    columns = load_dataset(folder / "english.json")
    promptflow = load_dataset(folder / "amnesty_qa_10_promptflow.jsonl")
    assert len(columns.questions) == 20 and len(promptflow.questions) == 10
    assert promptflow.questions[0].text == columns.questions[0].text
    assert not promptflow.questions[0].answers[0].startswith("[")  # JSON-encoded list decoded
    assert {d.id for d in promptflow.documents} <= {d.id for d in columns.documents}


def test_ragas_contexts_are_deduplicated(tmp_path):
    rows = [{"question": "q1", "ground_truth": "a1", "contexts": ["shared passage", "only one"]},
            {"question": "q2", "ground_truth": "a2", "contexts": ["shared passage"]}]
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    data = load_dataset(path)
    assert [d.text for d in data.documents] == ["shared passage", "only one"]
    assert data.documents[0].id == context_id("shared passage")
    assert data.questions[1].reference == "a2"


def test_hotpotqa_distractor(tmp_path):
    rows = [{
        "_id": "h1", "question": "Where was the designer of the Greywater Bridge born?", "answer": "Kestrel Bay",
        "type": "bridge", "level": "medium",
        "supporting_facts": [["Greywater Bridge", 0], ["Ilsa Marrow", 0]],
        "context": [["Greywater Bridge", ["The bridge was designed by Ilsa Marrow.", " It opened in 1911."]],
                    ["Ilsa Marrow", ["Ilsa Marrow was born in Kestrel Bay."]],
                    ["Puffins", ["Puffins nest on cliffs."]]],
    }]
    path = tmp_path / "hotpot_dev_distractor.json"
    path.write_text(json.dumps(rows))
    data = load_dataset(path)
    assert data.format == "hotpotqa" and len(data.documents) == 3
    assert data.questions[0].relevant_ids == {"Greywater Bridge", "Ilsa Marrow"}
    assert data.documents[0].text == "The bridge was designed by Ilsa Marrow. It opened in 1911."


def test_limit_and_bad_inputs(tmp_path):
    assert len(load_dataset(limit=3).questions) == 3
    with pytest.raises(DataError, match="dataset not found"):
        load_dataset(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "corpus.jsonl").write_text("")
    (empty / "queries.jsonl").write_text('{"_id": "q", "text": "why?"}\n')
    with pytest.raises(DataError, match="corpus is empty"):
        load_dataset(empty)
    (empty / "corpus.jsonl").write_text('{"_id": "d", "text": "x"}\n{broken\n')
    with pytest.raises(DataError, match="line 2 is not valid JSON"):
        load_dataset(empty)
    odd = tmp_path / "odd.json"
    odd.write_text('{"foo": 1}')
    with pytest.raises(DataError, match="unrecognised dataset format"):
        load_dataset(odd)
