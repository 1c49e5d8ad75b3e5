"""Plain text from the HTML a store export puts in descriptions and bullets.

Shops export descriptions as they show them: `<p>The <b>Stagg EKG</b> is a kettle &amp; more.</p>`. The
model reads wordpieces, so tags and entities cost positions of its 64 and carry nothing about the
product (docs/RESULTS.md, "HTML in descriptions", measures the effect). Block tags become a space, so
"<li>Gooseneck</li><li>Hold mode</li>" does not read as "GooseneckHold mode"; script and style bodies
are dropped; entities are decoded.
"""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

# A "<" followed by a letter, "/" or "!" (a tag, an end tag, a comment), or an entity: cheap to look
# for, so plain text skips the parser.
_MARKUP = re.compile(r"<[A-Za-z/!]|&(#\d+|#x[0-9A-Fa-f]+|[A-Za-z]+);")
_HIDDEN = {"script", "style", "template"}


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._hidden += tag in _HIDDEN
        self.parts.append(" ")  # inline tags too: "<b>A</b>B" is rare, "A<br>B" common

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in _HIDDEN and self._hidden > 0
        self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def has_markup(text: str) -> bool:
    return _MARKUP.search(text) is not None


def plain_text(text: str) -> str:
    """`text` without tags, with entities decoded and whitespace collapsed; text without markup is
    returned as it is (a "<" in "size < 10 cm" is not a tag)."""
    if not has_markup(text):
        return text
    collector = _TextCollector()
    collector.feed(text)
    collector.close()
    return " ".join(unescape("".join(collector.parts)).split())
