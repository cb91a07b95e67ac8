"""PDF through pypdf: pure Python (installs everywhere, no system library), maintained, and it reads the text
layer page by page; words split across lines by a hyphen are joined again."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from tuner.data.ingest._base import Parsed, Reader, Unreadable, tidy

#: `hyphen-\nation` -> `hyphenation`: a lowercase letter on both sides of a line-end hyphen
LINE_END_HYPHEN = re.compile(r"(?<=[a-zà-ÿ])-[ \t]*\n[ \t]*(?=[a-zà-ÿ])")


class PdfReader(Reader):
    suffixes = (".pdf",)

    def read(self, path: Path) -> Parsed:
        from pypdf import PdfReader as Pdf
        from pypdf.errors import FileNotDecryptedError, PdfReadError

        logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings about odd files are not the user's news
        try:
            pdf = Pdf(path)
            if pdf.is_encrypted and not pdf.decrypt(""):
                raise Unreadable("encrypted PDF (it needs a password)")
            pages = [page.extract_text() or "" for page in pdf.pages]
            title = str((pdf.metadata or {}).get("/Title") or "").strip()
        except FileNotDecryptedError:
            raise Unreadable("encrypted PDF (it needs a password)") from None
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # pypdf raises these from deep inside a damaged file's structure
            raise Unreadable(f"broken PDF ({type(exc).__name__}: {str(exc)[:80]})") from None
        except NotImplementedError as exc:
            raise Unreadable(f"PDF feature pypdf cannot read ({str(exc)[:80]})") from None
        text = tidy("\n\n".join(LINE_END_HYPHEN.sub("", page) for page in pages))
        if not text:
            raise Unreadable(f"no text layer in {len(pages)} page(s) (a scanned PDF? run OCR on it first)")
        return Parsed(title=title or path.stem, text=text)

