"""Entity graph for multi-hop expansion.

Entities are capitalised spans ("Ilsa Marrow", "Port Ardent"), a deterministic extractor that needs no model.
Chunks and entities form a bipartite networkx graph; one hop is chunk -> shared entity -> chunk. Entities found in
a large share of the corpus ("Normans" in a corpus about the Normans) link everything and so are left out.
A chunk that names another document's title also links to that document's first chunk (a Wikipedia article's
lead defines its subject): the bridge of a two-hop question ("the engineer who designed the bridge") is usually
named in the first document and described in the second.

A hop adds other documents: chunks of a document already among the seeds add nothing a document ranking counts,
and in a window they would displace documents retrieval found.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import Chunk

# a span never crosses a line break: a chunk's title line is not part of its first sentence's subject
_SPAN = re.compile(r"\b[A-Z][\w'\u2019-]*(?:[^\S\n]+(?:(?:of|the|de|von|van)[^\S\n]+)?[A-Z][\w'\u2019-]*)*")
# capitalised only because they start a sentence, or too generic to link anything
_STOP = frozenset(
    """a an and as at but by for from he her his however i if in into it its many most much no not of on one or our
    she since so some such that the their then there these they this those though to two was we were what when where
    which while who why with yet you after before during also all any both each first later many more other over
    under until upon""".split()
)


MIN_ENTITY_LIMIT = 5
#: a title link joins one chunk to one lead (no clique), so a title may be named more widely than a span
TITLE_SHARE = 0.5


def extract_entities(text: str) -> set[str]:
    entities = set()
    for match in _SPAN.finditer(text):
        words = re.sub(r"['\u2019]s\b", "", match.group()).split()
        while words and words[0].lower() in _STOP:  # "The Greywater Bridge" -> "Greywater Bridge"
            words = words[1:]
        span = " ".join(words)
        if len(span) > 2 and not span.isdigit():
            entities.add(span.lower())
    return entities


class EntityGraph:
    def __init__(self, chunks: Sequence[Chunk], max_entity_share: float = 0.05,
                 titles: Mapping[str, str] | None = None, links: str = "both"):
        """`titles`: document id -> title, for the links from a chunk naming a title to that document's lead;
        `links`: titles, entities, both, or auto (titles when there is any such link, else entities)."""
        self.max_entity_share = max_entity_share
        per_chunk = [extract_entities(chunk.text) for chunk in chunks]
        self.graph = nx.Graph()
        self.graph.add_nodes_from(range(len(chunks)))
        if links in ("titles", "both", "auto"):
            self.graph.add_edges_from(_title_links(chunks, per_chunk, titles or {}))
        if links in ("entities", "both") or (links == "auto" and self.graph.number_of_edges() == 0):
            self.graph.add_edges_from(_entity_links(per_chunk, max_entity_share))
        self.entity_count = sum(1 for node in self.graph if isinstance(node, tuple))

    def expand(self, seeds: Sequence[Candidate], chunks: Sequence[Chunk], hops: int, decay: float,
               limit: int, retrieved: Mapping[int, float] | None = None) -> list[Candidate]:
        """Chunks of other documents within `hops` entity hops of the seeds, rescored by their links; the best
        `limit` of them.

        A linked chunk keeps its own retrieval score (`retrieved`, 0 outside the window) and moves towards the
        seed that links it by decay^hop of the gap, but never above the weakest seed: it ranks above chunks as
        relevant as itself that nothing links, a chunk the question does not match stays low, and no seed is
        pushed out of the top_k by a chunk retrieval ranked below it (a reranker, given seeds and expansions,
        decides between them)."""
        if hops <= 0 or limit <= 0 or not seeds:
            return []
        retrieved = retrieved or {}
        taken = {doc for seed in seeds for doc in seed.chunk.doc_ids}
        ceiling = min(seed.score for seed in seeds)
        best: dict[int, Candidate] = {}
        for seed in seeds:
            distances = nx.single_source_shortest_path_length(self.graph, seed.position, cutoff=2 * hops)
            for node, distance in distances.items():
                if isinstance(node, tuple) or taken.intersection(chunks[node].doc_ids):
                    continue
                hop, own = distance // 2, retrieved.get(node, 0.0)
                score = min(ceiling, own + decay**hop * max(0.0, seed.score - own))
                if node not in best or score > best[node].score:
                    best[node] = Candidate(node, chunks[node], score, hop)
        return sorted(best.values(), key=lambda c: (-c.score, c.position))[:limit]


def _entity_links(per_chunk: Sequence[set[str]], max_entity_share: float) -> list[tuple[int, tuple]]:
    """Chunk -- shared capitalised name: an entity in 2 to `max_entity_share` of the chunks links them all."""
    frequency = Counter(entity for entities in per_chunk for entity in entities)
    # small corpora still link an entity shared by a handful of chunks
    limit = max(MIN_ENTITY_LIMIT, int(max_entity_share * len(per_chunk)))
    return [(position, ("entity", entity)) for position, entities in enumerate(per_chunk) for entity in entities
            if 2 <= frequency[entity] <= limit]  # an entity in one chunk links nothing


def _title_links(chunks: Sequence[Chunk], per_chunk: Sequence[set[str]],
                 titles: Mapping[str, str]) -> list[tuple[Any, Any]]:
    """Chunk naming a title -- that document's first chunk, one node per link, so the chunks naming a title do not
    link to each other directly. A title named in more than TITLE_SHARE of the chunks links nothing."""
    leads: dict[str, int] = {}
    for position, chunk in enumerate(chunks):
        if chunk.level == 0:  # a document's lead is its first passage, never a summary
            leads.setdefault(chunk.doc_id, position)
    named = {title.lower(): doc for doc, title in titles.items() if doc in leads and len(title) > 2}
    edges: list[tuple[Any, Any]] = []
    for title, doc in named.items():
        mentions = [p for p, entities in enumerate(per_chunk) if title in entities and doc not in chunks[p].doc_ids]
        if len(mentions) <= TITLE_SHARE * len(chunks):
            for p in mentions:
                edges += [(p, ("title", doc, p)), (("title", doc, p), leads[doc])]
    return edges
