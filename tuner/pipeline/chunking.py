"""Split documents into overlapping word windows; every chunk remembers its document."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tuner.data import Document


@dataclass(frozen=True)
class Chunk:
    id: str  # "<doc id>#<n>"
    doc_id: str
    text: str  # what is searched, reranked and shown to the generator (title first when the doc has one)


def chunk_documents(documents: Iterable[Document], size: int, overlap: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    for doc in documents:
        for n, piece in enumerate(split_words(doc.text, size, overlap)):
            chunks.append(Chunk(id=f"{doc.id}#{n}", doc_id=doc.id, text=_with_title(doc.title, piece)))
    return chunks


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


def _with_title(title: str, text: str) -> str:
    # the title anchors short chunks ("Mount Oswy") for both BM25 and the embedder
    if not title or text.lower().startswith(title.lower()):
        return text
    return f"{title}\n{text}"
