"""Kimi K2 tool calls. The id ``functions.NAME:INDEX`` must be echoed back verbatim::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

The singular ``<|tool_call_section_begin|>`` spelling is accepted as well.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import Reader, arguments_until, first_of, skip_space

__all__ = ["CALL_BEGIN", "read_kimi_k2"]

SECTION_BEGIN = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
SECTION_END = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
END_TOKENS = ("<|im_end|>",)
_CALL_ID = re.compile(r"(?:functions\.)?(?P<name>[^\s:]*)(?::\d+)?")


def read_kimi_k2(reader: Reader) -> None:
    """Text outside the section is the reply; each call keeps its own id."""
    source = reader.source
    orphans = (CALL_END, *SECTION_END)
    while True:
        begin, marker = first_of(source, (*SECTION_BEGIN, CALL_BEGIN), reader.pos)
        if not marker:
            break
        reader.text(begin, orphans=orphans)
        if marker != CALL_BEGIN:
            reader.markup(begin + len(marker))
        while source.startswith(CALL_BEGIN, pos := skip_space(source, reader.pos)):
            reader.markup(pos)
            if not _read_call(reader):
                break
        pos = skip_space(source, reader.pos)
        for end in SECTION_END:
            if source.startswith(end, pos):
                reader.markup(pos + len(end))
                break
    reader.text(len(source), orphans=orphans)


def _read_call(reader: Reader) -> bool:
    source = reader.source
    start = reader.pos
    where = f"{CALL_BEGIN} at position {start}"
    call_end = source.find(CALL_END, start)
    unreadable_end = len(source) if call_end == -1 else call_end + len(CALL_END)
    argument_begin = source.find(ARGUMENT_BEGIN, start)
    if argument_begin == -1:
        why = f"no {ARGUMENT_BEGIN} (was the output cut off?)"
        reader.unreadable(unreadable_end, f"{where}: {why}")
        return False
    call_id = source[start + len(CALL_BEGIN) : argument_begin].strip()
    matched = _CALL_ID.fullmatch(call_id)
    if matched is None:
        why = "the call has no id of the form functions.NAME:INDEX"
        reader.unreadable(unreadable_end, f"{where}: {why}")
        return False
    arguments, pos = arguments_until(
        source, argument_begin + len(ARGUMENT_BEGIN), (CALL_END, *SECTION_END)
    )
    pos = skip_space(source, pos)
    if source.startswith(CALL_END, pos):
        pos += len(CALL_END)
    elif pos != len(source):
        why = f"expected {CALL_END} after the arguments of {call_id[:80]!r}"
        reader.unreadable(unreadable_end, f"{where}: {why}")
        return False
    return reader.call(pos, matched.group("name"), arguments, call_id, where=where)
