import pytest

from tuner.config import IndexSettings
from tuner.data import Document
from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import chunk_documents, split_words
from tuner.pipeline.graph import EntityGraph, extract_entities


def settings(size: int, overlap: int, chunker: str = "words", contextual: str = "title") -> IndexSettings:
    return IndexSettings(chunk_size=size, chunk_overlap=overlap, chunker=chunker, stemmer="none",
                         contextual=contextual, embedder="all-MiniLM-L6-v2")


def test_short_texts_stay_whole_and_long_ones_overlap():
    assert split_words("one two three", 5, 2) == ["one two three"]
    words = " ".join(str(i) for i in range(10))
    pieces = split_words(words, 4, 1)
    assert pieces == ["0 1 2 3", "3 4 5 6", "6 7 8 9"]
    assert split_words("   ", 4, 1) == []


def test_every_chunk_keeps_its_document_and_title():
    docs = [Document("d1", " ".join(["word"] * 25), title="Alpha"), Document("d2", "Beta text", title="Beta")]
    chunks = chunk_documents(docs, settings(10, 2))
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
    chunks = chunk_documents(docs, settings(50, 5))
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
    chunks = chunk_documents(docs, settings(50, 5))
    graph = EntityGraph(chunks, max_entity_share=0.05)
    assert graph.expand([Candidate(0, chunks[0], 1.0)], chunks, hops=2, decay=0.5, limit=10) == []


def test_a_hop_adds_other_documents_only():
    docs = [Document("a", "Ilsa Marrow designed the Greywater Bridge. " + "More on the bridge. " * 40),
            Document("b", "Ilsa Marrow was born in Kestrel Bay.")]
    chunks = chunk_documents(docs, settings(50, 5))
    assert len([c for c in chunks if c.doc_id == "a"]) > 1
    graph = EntityGraph(chunks, max_entity_share=1.0)
    found = graph.expand([Candidate(0, chunks[0], 1.0)], chunks, hops=2, decay=0.5, limit=10)
    assert {c.chunk.doc_id for c in found} == {"b"}


def test_a_chunk_naming_a_title_links_to_that_documents_lead():
    docs = [Document("bridge", "The Greywater Bridge was designed by Ilsa Marrow."),
            Document("tower", "Ilsa Marrow also drew the Tollan Lighthouse."),
            Document("marrow", "She was born in Kestrel Bay. " * 40, title="Ilsa Marrow")]
    chunks = chunk_documents(docs, settings(50, 5))
    lead = next(p for p, c in enumerate(chunks) if c.doc_id == "marrow")
    assert len(chunks) - lead > 5  # each of her chunks starts with her title: as a span, "ilsa marrow" is too common
    seed = [Candidate(0, chunks[0], 1.0)]
    assert EntityGraph(chunks, max_entity_share=0.01).expand(seed, chunks, 2, 0.5, 10) == []
    titled = EntityGraph(chunks, max_entity_share=0.01, titles={"marrow": "Ilsa Marrow"})
    assert [(c.position, c.hop, c.score) for c in titled.expand(seed, chunks, 1, 0.5, 10)] == [(lead, 1, 0.5)]
    # the two chunks naming her reach each other only through her article: two hops
    assert [(c.chunk.doc_id, c.hop) for c in titled.expand(seed, chunks, 2, 0.5, 10)] == [("marrow", 1), ("tower", 2)]


def test_a_link_moves_a_chunk_towards_its_seed_but_never_above_the_weakest_seed():
    chunks, graph = _graph()  # a -(Ilsa Marrow)- b -(Dunmore Institute)- c -(Halvard)- d; e unlinked
    seeds = [Candidate(0, chunks[0], 0.8), Candidate(4, chunks[4], 0.5)]
    found = {c.chunk.doc_id: c for c in graph.expand(seeds, chunks, hops=2, decay=0.5, limit=10,
                                                       retrieved={0: 0.8, 4: 0.5, 1: 0.3, 2: 0.2})}
    assert found["b"].score == 0.5  # 0.3 + 0.5 * (0.8 - 0.3) = 0.55, held at the weakest seed
    assert found["c"].score == pytest.approx(0.2 + 0.5**2 * (0.8 - 0.2))  # two hops from a
    assert set(found) == {"b", "c"}  # seeds are not expansions; d is three hops away


def test_without_links_nothing_is_added_and_link_kinds_can_be_chosen():
    docs = [Document("bridge", "The Greywater Bridge was designed by Ilsa Marrow."),
            Document("marrow", "Ilsa Marrow was born in Kestrel Bay.", title="Ilsa Marrow"),
            Document("bay", "Kestrel Bay has smokehouses. Ilsa Marrow was born in Kestrel Bay.")]
    docs += [Document(f"x{i}", f"Unrelated text {i}.") for i in range(3)]  # a title named in half the chunks links
    chunks = chunk_documents(docs, settings(50, 5))
    seed = [Candidate(0, chunks[0], 1.0)]
    titles = {"marrow": "Ilsa Marrow"}
    reached = {links: {c.chunk.doc_id for c in EntityGraph(chunks, 1.0, titles, links).expand(seed, chunks, 1, 0.5, 10)}
               for links in ("titles", "entities", "both", "auto")}
    assert reached == {"titles": {"marrow"}, "entities": {"marrow", "bay"}, "both": {"marrow", "bay"},
                       "auto": {"marrow"}}
    untitled = EntityGraph(chunks, 1.0, {}, "auto")  # no title links to make: auto falls back to entities
    assert {c.chunk.doc_id for c in untitled.expand(seed, chunks, 1, 0.5, 10)} == {"marrow", "bay"}


ESSAY = """# Normans
The Normans were a people of Normandy. They gave their name to the region! Their name means "Norseman."

## Conquest
In 1066 they conquered England. The battle was fought at Hastings. William became king.
The conquest changed the language.

## Legacy
Norman French shaped English law."""


def test_sentence_chunks_never_cut_a_sentence_and_repeat_at_most_two():
    from tuner.pipeline.chunking import by_sentences, sentences

    prose = "\n".join(line for line in ESSAY.splitlines() if not line.startswith("#"))
    chunks = [text for text, _ in by_sentences(prose, 14, 8)]
    every = [s for line in prose.splitlines() if line.strip() for s in sentences(line)]
    assert every[2] == 'Their name means "Norseman."'  # a closing quote stays with its sentence
    assert all(len(c.split()) <= 14 for c in chunks)
    for chunk in chunks:  # whole sentences only
        assert any(chunk.startswith(s) for s in every) and any(chunk.endswith(s) for s in every), chunk
    for before, after in zip(chunks, chunks[1:]):
        shared = [s for s in sentences(after) if s in sentences(before)]
        assert len(shared) <= 2 and sum(len(s.split()) for s in shared) <= 8
    assert " ".join(dict.fromkeys(s for c in chunks for s in sentences(c))) == " ".join(every)  # all, in order
    assert [text for text, _ in by_sentences(prose, 14, 0)][1].startswith("Their name means")  # no overlap


def test_section_chunks_stay_inside_their_section_and_know_its_heading_path():
    from tuner.pipeline.chunking import by_sections

    chunks = by_sections(ESSAY, 30, 10)
    assert [path for _, path in chunks] == [("Normans",), ("Normans", "Conquest"), ("Normans", "Legacy")]
    assert chunks[1][0] == ("## Conquest\nIn 1066 they conquered England. The battle was fought at Hastings. "
                            "William became king. The conquest changed the language.")
    small = by_sections(ESSAY, 10, 10)  # a section longer than the size is packed at sentence ends, within it
    assert all("Hastings" not in text or "Norman French" not in text for text, _ in small)
    assert max(len(text.split()) for text, _ in small) <= 10


def test_contextual_puts_nothing_the_title_or_the_heading_path_first():
    doc = [Document("d", ESSAY, title="The Normans")]
    texts = {c: [ch.text for ch in chunk_documents(doc, settings(30, 10, "sections", c))]
             for c in ("none", "title", "title_path")}
    assert texts["none"][1].startswith("## Conquest")
    assert texts["title"][1].startswith("The Normans\n## Conquest")
    assert texts["title_path"][1].startswith("The Normans › Normans › Conquest\n## Conquest")


def test_the_words_chunker_is_the_seed_s_on_text_without_headings():
    text = " ".join(f"w{i}" for i in range(40))
    chunks = chunk_documents([Document("d", text, title="T")], settings(16, 4))
    assert [c.text for c in chunks] == [f"T\n{piece}" for piece in split_words(text, 16, 4)]
