"""Entity graph for multi-hop expansion.

Entities are capitalised spans ("Ilsa Marrow", "Port Ardent"), a deterministic extractor that needs no model.
Chunks and entities form a bipartite networkx graph; one hop is chunk -> shared entity -> chunk. Entities found in
a large share of the corpus ("Normans" in a corpus about the Normans) link everything and so are left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import networkx as nx

from tuner.pipeline.candidate import Candidate
from tuner.pipeline.chunking import Chunk

_SPAN = re.compile(r"\b[A-Z][\w'\u2019-]*(?:\s+(?:of\s+|the\s+|de\s+|von\s+|van\s+)?[A-Z][\w'\u2019-]*)*")
# capitalised only because they start a sentence, or too generic to link anything
_STOP = frozenset(
    """a an and as at but by for from he her his however i if in into it its many most much no not of on one or our
    she since so some such that the their then there these they this those though to two was we were what when where
    which while who why with yet you after before during also all any both each first later many more other over
    under until upon""".split()
)


MIN_ENTITY_LIMIT = 5


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
    def __init__(self, chunks: Sequence[Chunk], max_entity_share: float = 0.05):
        self.max_entity_share = max_entity_share
        per_chunk = [extract_entities(chunk.text) for chunk in chunks]
        frequency = Counter(entity for entities in per_chunk for entity in entities)
        # small corpora still link an entity shared by a handful of chunks
        limit = max(MIN_ENTITY_LIMIT, int(max_entity_share * len(chunks)))
        self.graph = nx.Graph()
        self.graph.add_nodes_from(range(len(chunks)))
        for position, entities in enumerate(per_chunk):
            for entity in entities:
                if 2 <= frequency[entity] <= limit:  # an entity in one chunk links nothing
                    self.graph.add_edge(position, ("entity", entity))
        self.entity_count = sum(1 for node in self.graph if isinstance(node, tuple))

    def expand(self, seeds: Sequence[Candidate], chunks: Sequence[Chunk], hops: int, decay: float,
               limit: int) -> list[Candidate]:
        """Chunks within `hops` entity hops of the seeds, scored seed score x decay^hop, best `limit` of them."""
        if hops <= 0 or limit <= 0:
            return []
        taken = {seed.position for seed in seeds}
        best: dict[int, Candidate] = {}
        for seed in seeds:
            distances = nx.single_source_shortest_path_length(self.graph, seed.position, cutoff=2 * hops)
            for node, distance in distances.items():
                if isinstance(node, tuple) or node in taken or distance == 0:
                    continue
                hop = distance // 2
                score = seed.score * decay**hop
                if node not in best or score > best[node].score:
                    best[node] = Candidate(node, chunks[node], score, hop)
        return sorted(best.values(), key=lambda c: (-c.score, c.position))[:limit]
