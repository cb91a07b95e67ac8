"""Word documents through python-docx: paragraphs in order, heading styles as markdown lines, tables row by row."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from tuner.data.ingest._base import Parsed, Reader, Unreadable, tidy


class DocxReader(Reader):
    suffixes = (".docx",)

    def read(self, path: Path) -> Parsed:
        import docx
        from docx.opc.exceptions import PackageNotFoundError

        try:
            document = docx.Document(str(path))
        except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
            raise Unreadable(f"broken .docx ({type(exc).__name__})") from None
        lines, first = [], ""
        for block in document.element.body.iterchildren():
            tag = block.tag.rsplit("}", 1)[-1]
            if tag == "p":
                paragraph = docx.text.paragraph.Paragraph(block, document)
                words = paragraph.text.strip()
                level = heading_level(paragraph.style.name if paragraph.style is not None else "")
                if words and level:
                    first = first or words
                    lines += ["", f"{'#' * level} {words}", ""]
                else:
                    lines.append(words)
            elif tag == "tbl":
                table = docx.table.Table(block, document)
                lines += [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows] + [""]
        title = (document.core_properties.title or "").strip()
        return Parsed(title=title or first or path.stem, text=tidy("\n".join(lines)))


def heading_level(style: str) -> int:
    """`Title` -> 1, `Heading 2` -> 2, any other style -> 0."""
    if style == "Title":
        return 1
    found = re.fullmatch(r"Heading (\d)", style)
    return min(6, int(found.group(1))) if found else 0
