from tuner.data import Document
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import chunk_documents, split_words
from tuner.pipeline.graph import EntityGraph, extract_entities


def test_short_texts_stay_whole_and_long_ones_overlap():
    assert split_words("one two three", 5, 2) == ["one two three"]
    words = " ".join(str(i) for i in range(10))
    pieces = split_words(words, 4, 1)
    assert pieces == ["0 1 2 3", "3 4 5 6", "6 7 8 9"]
    assert split_words("   ", 4, 1) == []


def test_every_chunk_keeps_its_document_and_title():
    docs = [Document("d1", " ".join(["word"] * 25), title="Alpha"), Document("d2", "Beta text", title="Beta")]
    chunks = chunk_documents(docs, size=10, overlap=2)
    assert [c.doc_id for c in chunks] == ["d1", "d1", "d1", "d2"]
    assert chunks[0].id == "d1#0" and chunks[0].text.startswith("Alpha\n")
    assert chunks[-1].text == "Beta text"  # title already opens the text


def test_entities_are_capitalised_spans_without_sentence_starters():
    found = extract_entities("The Greywater Bridge was designed by Ilsa Marrow. It opened in 1911. Marrow's plans")
    assert {"greywater bridge", "ilsa marrow", "marrow"} <= found
    assert "the" not in found and "it" not in found and "1911" not in found


def _graph():
    docs = [
        Document("a", "The Greywater Bridge was designed by Ilsa Marrow."),
        Document("b", "Ilsa Marrow trained at the Dunmore Institute."),
        Document("c", "The Dunmore Institute stands in Halvard."),
        Document("d", "Halvard has a container port."),
        Document("e", "Unrelated text about puffins."),
    ]
    chunks = chunk_documents(docs, 50, 5)
    return chunks, EntityGraph(chunks, max_entity_share=1.0)


def test_hops_reach_further_with_decayed_scores():
    chunks, graph = _graph()
    seed = [Candidate(0, chunks[0], 0.8)]
    assert graph.expand(seed, chunks, hops=0, decay=0.5, limit=10) == []
    one = graph.expand(seed, chunks, hops=1, decay=0.5, limit=10)
    assert [(c.chunk.doc_id, c.hop, c.score) for c in one] == [("b", 1, 0.4)]
    three = graph.expand(seed, chunks, hops=3, decay=0.5, limit=10)
    assert [(c.chunk.doc_id, c.hop) for c in three] == [("b", 1), ("c", 2), ("d", 3)]
    assert [c.score for c in three] == [0.4, 0.2, 0.1]
    assert len(graph.expand(seed, chunks, hops=3, decay=0.5, limit=2)) == 2


def test_too_common_entities_link_nothing():
    docs = [Document(str(i), f"Normans lived here, part {i}.") for i in range(40)]
    chunks = chunk_documents(docs, 50, 5)
    graph = EntityGraph(chunks, max_entity_share=0.05)
    assert graph.expand([Candidate(0, chunks[0], 1.0)], chunks, hops=2, decay=0.5, limit=10) == []
