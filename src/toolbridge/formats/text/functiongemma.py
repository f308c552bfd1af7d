"""FunctionGemma tool calls (Google's ``functiongemma-270m-it``)::

    <start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}<end_function_call>

The grammar follows the model's chat template: after ``call:NAME`` comes a ``{…}`` map
of ``key:value`` pairs separated by commas; a string value is enclosed in
``<escape>…<escape>`` (nothing inside is escaped), other values are ``true``,
``false``, ``null``, numbers, nested ``{…}`` maps and ``[…]`` lists. Keys are bare or,
as in declarations, ``<escape>``-quoted. The arguments come back as an object; a
body that does not follow the grammar is a problem, never a guess.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from toolbridge.formats.text._common import Reader, skip_space

__all__ = ["START", "read_functiongemma"]

START = "<start_function_call>"
END = "<end_function_call>"
ESCAPE = "<escape>"
END_TOKENS = ("<start_function_response>", "<end_of_turn>", "<eos>")
_NAME = re.compile(r"call:([^{\n]*)\{")
_KEY = re.compile(r"[^:{}\[\],<>\s]+")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WORDS = {"true": True, "false": False, "null": None}
_MAX_DEPTH = 64
_MAX_DIGITS = 1000


class _Unreadable(ValueError):
    """The body breaks the grammar; the message says where and how."""


def read_functiongemma(reader: Reader) -> None:
    """Text outside ``<start_function_call>…<end_function_call>`` is the reply."""
    source = reader.source
    while (start := source.find(START, reader.pos)) != -1:
        reader.text(start, orphans=(END,))
        where = f"{START} at position {start}"
        close = source.find(END, start)
        block_end = len(source) if close == -1 else close + len(END)
        named = _NAME.match(source, skip_space(source, start + len(START)))
        if named is None:
            reader.unreadable(block_end, f"{where}: expected call:NAME{{…}}")
            continue
        try:
            arguments, pos = _Parser(source).map(named.end())
        except _Unreadable as exc:
            cut = " (was the output cut off?)" if close == -1 else ""
            reader.unreadable(block_end, f"{where}: {exc}{cut}")
            continue
        pos = skip_space(source, pos)
        if source.startswith(END, pos):
            pos += len(END)
        elif pos != len(source):
            reader.unreadable(block_end, f"{where}: expected {END} after the arguments")
            continue
        reader.call(pos, named.group(1), arguments, where=where)
    reader.text(len(source), orphans=(END,))


class _Parser:
    """A recursive-descent reader of one value of the grammar, depth-limited."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.depth = 0

    def map(self, pos: int) -> tuple[dict[str, Any], int]:
        """The pairs after an opening ``{`` at ``pos - 1``, and the position after ``}``."""
        result: dict[str, Any] = {}
        pos = self._enter(pos)
        if self.source.startswith("}", pos):
            self.depth -= 1
            return result, pos + 1
        while True:
            key, pos = self._key(pos)
            if key in result:
                raise _Unreadable(f"key {key!r} is given twice")
            if not self.source.startswith(":", pos):
                raise _Unreadable(f"expected ':' after key {key!r} at position {pos}")
            result[key], pos = self.value(pos + 1)
            pos = skip_space(self.source, pos)
            if self.source.startswith("}", pos):
                self.depth -= 1
                return result, pos + 1
            if not self.source.startswith(",", pos):
                raise _Unreadable(f"expected ',' or '}}' at position {pos}")
            pos += 1

    def value(self, pos: int) -> tuple[Any, int]:
        source = self.source
        pos = skip_space(source, pos)
        if source.startswith(ESCAPE, pos):
            return self._string(pos)
        if source.startswith("{", pos):
            return self.map(pos + 1)
        if source.startswith("[", pos):
            return self._list(pos + 1)
        for word, value in _WORDS.items():
            if source.startswith(word, pos):
                return value, pos + len(word)
        number = _NUMBER.match(source, pos)
        if number is not None:
            return _number(number.group()), number.end()
        raise _Unreadable(
            f"the value at position {pos} is not an {ESCAPE}-quoted string, a number, "
            "true, false, null, a {…} map or a […] list"
        )

    def _list(self, pos: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        pos = self._enter(pos)
        if self.source.startswith("]", pos):
            self.depth -= 1
            return items, pos + 1
        while True:
            item, pos = self.value(pos)
            items.append(item)
            pos = skip_space(self.source, pos)
            if self.source.startswith("]", pos):
                self.depth -= 1
                return items, pos + 1
            if not self.source.startswith(",", pos):
                raise _Unreadable(f"expected ',' or ']' at position {pos}")
            pos += 1

    def _enter(self, pos: int) -> int:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Unreadable(f"the arguments nest deeper than {_MAX_DEPTH} levels")
        return skip_space(self.source, pos)

    def _key(self, pos: int) -> tuple[str, int]:
        pos = skip_space(self.source, pos)
        if self.source.startswith(ESCAPE, pos):
            key, pos = self._string(pos)
            return key, skip_space(self.source, pos)
        matched = _KEY.match(self.source, pos)
        if matched is None:
            raise _Unreadable(f"expected a key at position {pos}")
        return matched.group(), skip_space(self.source, matched.end())

    def _string(self, pos: int) -> tuple[str, int]:
        start = pos + len(ESCAPE)
        end = self.source.find(ESCAPE, start)
        if end == -1:
            raise _Unreadable(f"the string at position {pos} has no closing {ESCAPE}")
        return self.source[start:end], end + len(ESCAPE)


def _number(text: str) -> int | float:
    if len(text) > _MAX_DIGITS:
        raise _Unreadable(f"the number {text[:20]}… is too long")
    value: int | float = json.loads(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise _Unreadable(f"the number {text[:20]} does not fit a float")
    return value
