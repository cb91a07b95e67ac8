"""HTML through Beautiful Soup (the standard library's parser underneath: nothing compiled): the page's text with
navigation, scripts and styles dropped, headings as markdown lines, one block per paragraph."""

from __future__ import annotations

import re
from pathlib import Path

from tuner.data.ingest._base import Parsed, Reader, decode_text, tidy

#: elements that hold no content of the page: menus, page chrome, code, forms
DROPPED = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "svg", "iframe",
           "button", "select")
#: elements that end a block of text
BLOCKS = ("p", "div", "section", "article", "main", "li", "tr", "table", "ul", "ol", "dl", "dt", "dd", "pre",
          "blockquote", "figure", "figcaption", "br", "hr")


class HtmlReader(Reader):
    suffixes = (".html", ".htm")

    def read(self, path: Path) -> Parsed:
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(decode_text(path.read_bytes()), "html.parser")
        title = soup.title.get_text(" ", strip=True) if soup.title else ""
        for element in soup(DROPPED + ("title", "head")):
            element.decompose()
        # ARIA navigation landmarks are menus too, whatever the tag
        for element in soup.find_all(attrs={"role": ("navigation", "banner", "contentinfo")}):
            element.decompose()
        # in HTML a line break in the source is a space; only <pre> keeps its lines
        for string in soup.find_all(string=True):
            if not string.find_parent("pre"):
                string.replace_with(re.sub(r"\s+", " ", str(string)))
        first = ""
        for heading in soup.find_all(("h1", "h2", "h3", "h4", "h5", "h6")):
            words = heading.get_text(" ", strip=True)
            first = first or words
            heading.replace_with(f"\n\n{'#' * int(heading.name[1])} {words}\n\n" if words else "")
        for block in soup.find_all(BLOCKS):
            block.insert_before("\n")
            block.insert_after("\n")
        text = tidy(soup.get_text())
        return Parsed(title=title or first or path.stem, text=text)
