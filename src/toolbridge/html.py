"""HTML to readable text with the standard library's parser, for tools that fetch pages.

Keeps what a reader sees: headings, paragraphs, list items, table rows, link targets
and preformatted blocks. Drops what a reader does not: scripts, styles, templates,
and elements marked hidden (a common place to tuck instructions aimed at a model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urljoin

__all__ = ["HtmlText", "html_to_text"]

_SKIPPED = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "head"}
)
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt",
        "figcaption", "figure", "footer", "form", "header", "li", "main", "nav", "ol", "p",
        "pre", "section", "summary", "table", "tr", "ul",
    }
)  # fmt: skip
_HEADINGS = {f"h{level}": "#" * level for level in range(1, 7)}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(frozen=True, slots=True)
class HtmlText:
    """The readable text of a page and its title (empty when it has none)."""

    title: str
    text: str


def _is_hidden(attrs: dict[str, str | None]) -> bool:
    return (
        "hidden" in attrs
        or attrs.get("aria-hidden") == "true"
        or bool(_HIDDEN_STYLE.search(attrs.get("style") or ""))
    )


class _TextExtractor(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skip_stack: list[str] = []  # open tags whose content is dropped
        self._in_title = False
        self._pre_depth = 0
        self._links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self._void(tag, dict(attrs))
            return
        if tag == "title":
            self._in_title = True
            return
        if self._skip_stack or tag in _SKIPPED or _is_hidden(dict(attrs)):
            self._skip_stack.append(tag)
            return
        if tag in _HEADINGS:
            self.parts.append(f"\n\n{_HEADINGS[tag]} ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in _BLOCKS:
            self.parts.append("\n\n" if tag in ("p", "pre", "blockquote") else "\n")
        if tag == "pre":
            self._pre_depth += 1
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            target = urljoin(self.base_url, href) if href else ""
            link = target if target.startswith(("http://", "https://")) else None
            self._links.append(link)
            if link:
                self.parts.append("[")

    def _void(self, tag: str, attrs: dict[str, str | None]) -> None:
        if self._skip_stack or _is_hidden(attrs):
            return
        if tag == "br":
            self.parts.append("\n")
        elif tag == "hr":
            self.parts.append("\n\n---\n\n")
        elif tag == "img" and attrs.get("alt"):
            self.parts.append(f"[image: {attrs['alt']}]")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self._void(tag, dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if self._skip_stack:
            if tag in self._skip_stack:
                del self._skip_stack[
                    len(self._skip_stack) - 1 - self._skip_stack[::-1].index(tag) :
                ]
            return
        if tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
            self.parts.append("\n\n")
        elif tag == "a" and self._links:
            link = self._links.pop()
            if link:
                self.parts.append(f"]({link})")
        elif tag in _HEADINGS or tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif self._skip_stack:
            return
        elif self._pre_depth:
            self.parts.append(data.replace(" ", "\u00a0"))
        else:
            self.parts.append(_SPACES.sub(" ", data))


def html_to_text(html: str, base_url: str = "") -> HtmlText:
    """The readable text of `html`; relative links are made absolute against `base_url`."""
    parser = _TextExtractor(base_url)
    parser.feed(html)
    parser.close()
    lines = (line.strip(" ").replace("\u00a0", " ") for line in "".join(parser.parts).split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    title = _SPACES.sub(" ", "".join(parser.title)).strip()
    return HtmlText(title, text)
