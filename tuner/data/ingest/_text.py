"""Plain text and markdown: read as they are (markdown headings are already the lines the chunker cuts at)."""

from __future__ import annotations

from pathlib import Path

from tuner.data.ingest._base import Parsed, Reader, decode_text, first_heading, tidy


class TextReader(Reader):
    suffixes = (".txt", ".md", ".markdown")

    def read(self, path: Path) -> Parsed:
        text = tidy(decode_text(path.read_bytes()))
        return Parsed(title=first_heading(text) or path.stem, text=text)
