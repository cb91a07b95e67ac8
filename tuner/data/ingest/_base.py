"""The contract every file reader keeps: one file in, one titled text out, or one reason it cannot be read."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path


class Unreadable(Exception):
    """A file left out of the corpus; the message is the reason the ingest lists (`encrypted PDF`, `empty`)."""


@dataclass(frozen=True)
class Parsed:
    #: the document's title: its first heading, <title> or metadata title; the file name when it has none
    title: str
    #: plain text, headings kept as markdown lines (`## Setup`) so the `sections` chunker can cut at them
    text: str


class Reader(ABC):
    """Reads the files whose names end in one of `suffixes`. A reader raises Unreadable with a short reason for a
    file it cannot read; anything else it raises is a bug."""

    suffixes: tuple[str, ...] = ()

    @abstractmethod
    def read(self, path: Path) -> Parsed:
        ...


def tidy(text: str) -> str:
    """Spaces collapsed within lines, at most one blank line between blocks, no blank ends."""
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def first_heading(text: str) -> str:
    """The text of the first markdown heading line, or ''."""
    found = re.search(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.MULTILINE)
    return found.group(1) if found else ""


def decode_text(raw: bytes) -> str:
    """UTF-8 (a byte-order mark dropped), else Windows-1252 — what older editors on Windows save; a file with NUL
    bytes, or bytes neither can decode, is binary."""
    if b"\x00" in raw:
        raise Unreadable("binary file (NUL bytes), not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        raise Unreadable("not text: neither UTF-8 nor Windows-1252") from None
