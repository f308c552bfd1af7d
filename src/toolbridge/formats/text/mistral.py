"""Mistral ``[TOOL_CALLS]`` in its tokenizer variants.

- up to tokenizer v7: ``[TOOL_CALLS] [{"name": "f", "arguments": {…}}, …]``
- v11 and later: ``[TOOL_CALLS]f[ARGS]{…}``, repeated for parallel calls
- with call ids: ``[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{…}``

Generated ids are nine letters and digits, the only shape Mistral's API accepts.
Magistral's ``[THINK]…[/THINK]`` reasoning is split off first.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import Reader, arguments_until, scan_json, skip_space

__all__ = ["TOOL_CALLS", "read_mistral"]

TOOL_CALLS = "[TOOL_CALLS]"
END_TOKENS = ("</s>",)
_NAMED = re.compile(r"([^\[\]\n]{0,200}?)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9_-]+)\s*)?\[ARGS\]")


def read_mistral(reader: Reader) -> None:
    """Text before the first ``[TOOL_CALLS]`` is the reply; each marker starts calls."""
    source = reader.source
    while (marker := source.find(TOOL_CALLS, reader.pos)) != -1:
        reader.text(marker)
        reader.markup(skip_space(source, marker + len(TOOL_CALLS)))
        _read_calls(reader, marker)
    reader.text(len(source))


def _read_calls(reader: Reader, marker: int) -> None:
    """The calls after one marker, up to the next marker or an end token."""
    source = reader.source
    start = reader.pos
    where = f"{TOOL_CALLS} at position {marker}"
    if source.startswith(("[", "{"), start):
        found = scan_json(source, start)
        if found is None:
            why = "the JSON is not complete (was the output cut off?)"
            reader.unreadable(_section_end(source, start), f"{where}: {why}")
            return
        json_text, end = found
        if json_text.startswith("{"):
            reader.call_object(end, json_text, where)
            return
        items = _array_items(json_text, start)
        if items is None:
            reader.unreadable(end, f"{where}: expected a JSON array of call objects")
            return
        for item_start, item_text in items:
            reader.markup(item_start)
            reader.call_object(item_start + len(item_text), item_text, where)
        reader.markup(end)
        return
    named = _NAMED.match(source, start)
    if named is None:
        why = "expected NAME[ARGS]{…} or a JSON array of calls"
        reader.unreadable(_section_end(source, start), f"{where}: {why}")
        return
    arguments, end = arguments_until(source, named.end(), (TOOL_CALLS, *END_TOKENS))
    reader.call(end, named.group(1).strip(), arguments, named.group(2), where=where)


def _section_end(source: str, start: int) -> int:
    end = source.find(TOOL_CALLS, start)
    return len(source) if end == -1 else end


def _array_items(json_text: str, offset: int) -> list[tuple[int, str]] | None:
    """Where each element of a JSON array starts (in the reply) and its exact text."""
    items: list[tuple[int, str]] = []
    pos = skip_space(json_text, 1)
    if json_text.startswith("]", pos):
        return items
    while (found := scan_json(json_text, pos)) is not None:
        items.append((offset + skip_space(json_text, pos), found[0]))
        pos = skip_space(json_text, found[1])
        if json_text.startswith("]", pos):
            return items
        if not json_text.startswith(",", pos):
            return None
        pos += 1
    return None
