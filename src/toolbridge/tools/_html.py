"""HTML to readable text for tools that fetch pages.

`page_text` gives the page's main content as Markdown when the ``web`` extra's
trafilatura is installed (the article, without navigation, banners and sidebars),
and otherwise `html_to_text`: every visible block, with the standard library's
parser. Both drop what a reader does not see: scripts, styles, templates, and
elements marked hidden (a common place to tuck instructions aimed at a model).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Literal
from urllib.parse import urljoin

__all__ = ["HtmlText", "html_to_text", "main_content", "page_text"]

logger = logging.getLogger(__name__)

Extractor = Literal["main_content", "text"]

# Below this much visible text a page has no chrome worth removing, and trafilatura
# falls back to a line-per-element baseline: such pages are returned whole as text.
MIN_MAIN_CONTENT_CHARS = 1000

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
    """The readable text of a page, its title (empty when it has none), and which
    extractor made it: ``main_content`` (trafilatura, Markdown) or ``text`` (stdlib)."""

    title: str
    text: str
    extractor: Extractor = "text"


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


def page_text(html: str, base_url: str = "", *, main: bool = True) -> HtmlText:
    """The page as text: its main content when `main` and the extractor can find it,
    else all visible text (`html_to_text`). Never raises for a missing extra."""
    if main:
        try:
            found = main_content(html, base_url)
        except ImportError as exc:
            logger.debug("main-content extraction unavailable (%s); using plain text", exc)
        else:
            if found is not None:
                return found
    return html_to_text(html, base_url)


def main_content(html: str, base_url: str = "") -> HtmlText | None:
    """The main content of `html` as Markdown, or None when there is none to pick out
    (no main content found, or a page under `MIN_MAIN_CONTENT_CHARS` of visible text).

    Hidden elements and scripts are removed with lxml first (trafilatura keeps the text
    of ``hidden`` elements), links are made absolute and non-web links unwrapped, then
    trafilatura picks the article. Raises ImportError without the ``web`` extra.
    """
    import trafilatura
    from lxml import etree
    from lxml import html as lxml_html

    if not html.strip():
        return None
    try:
        tree = lxml_html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return None
    title = _SPACES.sub(" ", tree.findtext(".//title") or "").strip()
    if _is_hidden(dict(tree.attrib)):
        return HtmlText(title, "", "main_content")
    _strip_unseen(tree)
    if len(_SPACES.sub(" ", tree.text_content()).strip()) < MIN_MAIN_CONTENT_CHARS:
        return None
    if base_url:
        tree.make_links_absolute(base_url, resolve_base_href=True, handle_failures="discard")
    for link in tree.iter("a"):
        if not (link.get("href") or "").startswith(("http://", "https://")):
            link.attrib.pop("href", None)
    text = trafilatura.extract(
        tree,
        url=base_url or None,
        output_format="markdown",
        include_links=True,
        include_formatting=True,
        include_tables=True,
        include_images=False,
        include_comments=False,
    )
    if not text or not text.strip():
        return None
    return HtmlText(title, _BLANK_LINES.sub("\n\n", text).strip(), "main_content")


def _strip_unseen(tree: Any) -> None:
    """Remove scripts, styles and elements marked hidden, with their content."""
    doomed = [
        element
        for element in tree.iter()
        if isinstance(element.tag, str)
        and element.getparent() is not None
        and (element.tag in _SKIPPED - {"head"} or _is_hidden(dict(element.attrib)))
    ]
    for element in doomed:
        if element.getparent() is not None:  # not already gone with an ancestor
            element.drop_tree()
