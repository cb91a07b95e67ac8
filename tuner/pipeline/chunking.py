"""Split documents into chunks; every chunk remembers its document.

Three chunkers: `words` (fixed windows of words, the seed's), `sentences` (windows cut at sentence ends) and
`sections` (split at markdown headings and paragraph breaks, then packed up to the size); `raptor` adds LLM
summaries over the `sentences` windows (raptor.py). Overlap is in words for
`words`; the other two repeat the last whole sentences of the chunk before — at most two, within the overlap's
words — so no sentence is ever cut. What a chunk carries about its document (`contextual`): nothing, its title as a
first line (the seed's), the title and the heading path it sits under, or a sentence an LLM wrote to situate it
(`situate`, see situate.py; where it wrote none, the title).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tuner.config import IndexSettings
from tuner.data import Document
from tuner.pipeline.situate import Situate
from tuner.text import sentences

#: a markdown heading line: "## Norman conquest"
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
#: sentences the overlap of `sentences` and `sections` repeats at most
OVERLAP_SENTENCES = 2


@dataclass(frozen=True)
class Chunk:
    id: str  # "<doc id>#<n>"; a RAPTOR summary's "raptor<level>#<n>"
    doc_id: str  # a summary's: the document most of it comes from
    text: str  # what is searched, reranked and shown to the generator (with its context line, if any)
    covers: tuple[str, ...] = ()  # a summary's documents, most-represented first (raptor.py)
    level: int = 0  # 0: a passage of one document; 1, 2: a RAPTOR summary over the level below

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """The documents this chunk counts as for the id-based metrics."""
        return self.covers or (self.doc_id,)


@dataclass(frozen=True)
class Block:
    """A paragraph (or a heading line) and the headings it sits under."""

    text: str
    path: tuple[str, ...]


def chunk_documents(documents: Iterable[Document], settings: IndexSettings, situate: Situate | None = None,
                    on_chunk: Callable[[int, int], None] | None = None) -> list[Chunk]:
    """`situate` writes the context of `contextual: llm` (build_index refuses that setting without a writer): one
    call per chunk, `on_chunk(done, total)` after each."""
    pieces = [(doc, n, piece, path) for doc in documents
              for n, (piece, path) in enumerate(CHUNKERS[settings.chunker](doc.text, settings.chunk_size,
                                                                           settings.chunk_overlap))]
    chunks: list[Chunk] = []
    for doc, n, piece, path in pieces:
        if settings.contextual == "llm":
            written = situate(doc, piece)
            text = f"{written}\n{piece}" if written else in_context("title", doc.title, path, piece)
            if on_chunk:
                on_chunk(len(chunks) + 1, len(pieces))
        else:
            text = in_context(settings.contextual, doc.title, path, piece)
        chunks.append(Chunk(id=f"{doc.id}#{n}", doc_id=doc.id, text=text))
    return chunks


def in_context(contextual: str, title: str, path: tuple[str, ...], text: str) -> str:
    if contextual == "none":
        return text
    line = " › ".join(p for p in ((title,) + path if contextual == "title_path" else (title,)) if p)
    # the title anchors short chunks ("Mount Oswy") for both BM25 and the embedder
    if not line or text.lower().startswith(line.lower()):
        return text
    return f"{line}\n{text}"


def blocks(text: str) -> list[Block]:
    """The text's paragraphs (blank-line separated) and heading lines, each with its heading path."""
    found: list[Block] = []
    path: list[tuple[int, str]] = []
    paragraph: list[str] = []

    def close() -> None:
        if paragraph:
            found.append(Block(" ".join(paragraph), tuple(t for _, t in path)))
            paragraph.clear()

    for line in text.splitlines():
        heading = HEADING.match(line.strip())
        if heading:
            close()
            level = len(heading.group(1))
            path[:] = [(lv, t) for lv, t in path if lv < level] + [(level, heading.group(2))]
            found.append(Block(line.strip(), tuple(t for _, t in path)))
        elif line.strip():
            paragraph.append(line.strip())
        else:
            close()
    close()
    return found


def split_words(text: str, size: int, overlap: int) -> list[str]:
    """Windows of `size` words advancing by size - overlap; a text that fits is kept verbatim."""
    words = text.split()
    if not words:
        return []
    if len(words) <= size:
        return [text.strip()]
    stride = size - overlap
    pieces = []
    for start in range(0, len(words), stride):
        pieces.append(" ".join(words[start : start + size]))
        if start + size >= len(words):
            break
    return pieces


Path = tuple[str, ...]


def by_words(text: str, size: int, overlap: int) -> list[tuple[str, Path]]:
    """The seed's word windows; each under the heading path in force where it starts."""
    pieces = split_words(text, size, overlap)
    if "#" not in text:  # no heading (the common case): the seed's windows exactly
        return [(piece, ()) for piece in pieces]
    paths = [b.path for b in blocks(text) for _ in b.text.split()] or [()]
    return [(piece, paths[min(i * (size - overlap), len(paths) - 1)]) for i, piece in enumerate(pieces)]


def pack(units: list[tuple[str, Path]], size: int, overlap: int) -> list[tuple[str, Path]]:
    """Sentences packed into chunks of at most `size` words, each chunk after the first opening with the last
    whole sentences of the one before (at most two, within `overlap` words); a sentence longer than `size` is cut
    into word windows. A chunk sits under the heading path of its first new sentence."""
    pieces = [(piece, path) for sentence, path in units
              for piece in (split_words(sentence, size, 0) if len(sentence.split()) > size else [sentence])]
    chunks: list[tuple[str, Path]] = []
    current: list[str] = []
    carried, path = 0, ()  # sentences at the head of `current` repeated from the chunk before
    for piece, piece_path in pieces:
        if len(current) > carried and _words(current + [piece]) > size:
            chunks.append((" ".join(current), path))
            current = _tail(current, overlap)
            while current and _words(current + [piece]) > size:
                current = current[1:]
            carried = len(current)
        if len(current) == carried:
            path = piece_path
        current.append(piece)
    if len(current) > carried:
        chunks.append((" ".join(current), path))
    return chunks


def _words(units: list[str]) -> int:
    return sum(len(u.split()) for u in units)


def _tail(units: list[str], overlap: int) -> list[str]:
    tail: list[str] = []
    for unit in reversed(units[-OVERLAP_SENTENCES:]):
        if _words([unit, *tail]) > overlap:
            break
        tail.insert(0, unit)
    return tail


def by_sentences(text: str, size: int, overlap: int) -> list[tuple[str, Path]]:
    """Windows cut at sentence ends, across paragraphs and headings."""
    return pack([(s, b.path) for b in blocks(text) for s in sentences(b.text)], size, overlap)


def by_sections(text: str, size: int, overlap: int) -> list[tuple[str, Path]]:
    """Split at headings (a heading line opens its section's first chunk) and paragraph breaks: a section that fits
    is one chunk, paragraphs kept apart; a longer one is packed at sentence ends, never across sections."""
    found: list[tuple[str, Path]] = []
    section: list[Block] = []
    for block in [*blocks(text), None]:  # None closes the last section
        if section and (block is None or HEADING.match(block.text)):
            paragraphs = [b.text for b in section]
            if _words(paragraphs) <= size:
                found.append(("\n".join(paragraphs), section[-1].path))
            else:
                found.extend(pack([(s, b.path) for b in section for s in sentences(b.text)], size, overlap))
            section = []
        if block is not None:
            section.append(block)
    return found


#: raptor's leaves are sentence windows; index.py adds its summaries once the leaves are embedded
CHUNKERS = {"words": by_words, "sentences": by_sentences, "sections": by_sections, "raptor": by_sentences}
