"""Mistral ``[TOOL_CALLS]`` in its tokenizer variants.

- up to tokenizer v7: ``[TOOL_CALLS] [{"name": "f", "arguments": {…}}, …]``
- v11 and later: ``[TOOL_CALLS]f[ARGS]{…}``, repeated for parallel calls
- with call ids: ``[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{…}``

Generated ids are nine letters and digits, the only shape Mistral's API accepts.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import (
    CallCollector,
    TextCalls,
    arguments_until,
    scan_json,
    skip_space,
)

__all__ = ["parse_mistral"]

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
_NAMED = re.compile(r"([A-Za-z0-9_.:-]+)\s*(?:\[CALL_ID\]\s*([A-Za-z0-9_-]+)\s*)?\[ARGS\]")
_END_TOKENS = ("</s>",)


def parse_mistral(text: str, *, id_salt: str = "") -> TextCalls:
    """Text before the first ``[TOOL_CALLS]`` is the reply; each marker starts calls."""
    calls = CallCollector(id_salt, alphanumeric9_ids=True)
    first = text.find(TOOL_CALLS)
    if first == -1:
        return calls.result(text)
    pos = first
    while text.startswith(TOOL_CALLS, pos):
        start = skip_space(text, pos + len(TOOL_CALLS))
        end = _read_calls(text, start, calls)
        if end is None:
            return calls.result(text[:first] + text[pos:])
        pos = skip_space(text, end)
    rest = text[pos:]
    for token in _END_TOKENS:
        rest = rest.strip().removeprefix(token)
    return calls.result(text[:first] + rest)


def _read_calls(text: str, start: int, calls: CallCollector) -> int | None:
    """Read the calls after one marker; the position after them, or None on a problem."""
    where = f"{TOOL_CALLS} at position {start}"
    if text.startswith(("[", "{"), start):
        found = scan_json(text, start)
        if found is None:
            calls.problem(f"{where}: the JSON is not complete (was the output cut off?)")
            return None
        json_text, end = found
        if json_text.startswith("{"):
            return end if calls.add_object(json_text, where) else None
        objects = _array_items(json_text)
        if objects is None:
            calls.problem(f"{where}: expected a JSON array of call objects")
            return None
        for item in objects:
            if not calls.add_object(item, where):
                return None
        return end
    named = _NAMED.match(text, start)
    if named is None:
        calls.problem(f"{where}: expected NAME[ARGS]{{…}} or a JSON array of calls")
        return None
    arguments, end = arguments_until(text, named.end(), (TOOL_CALLS, *_END_TOKENS))
    calls.add(named.group(1), arguments, named.group(2))
    return end


def _array_items(json_text: str) -> list[str] | None:
    """The exact text of each element of a JSON array (kept as text for strict decoding)."""
    items: list[str] = []
    pos = skip_space(json_text, 1)
    if json_text.startswith("]", pos):
        return items
    while (found := scan_json(json_text, pos)) is not None:
        items.append(found[0])
        pos = skip_space(json_text, found[1])
        if json_text.startswith("]", pos):
            return items
        if not json_text.startswith(",", pos):
            return None
        pos += 1
    return None
