"""Kimi K2 tool calls. The id ``functions.NAME:INDEX`` must be echoed back verbatim::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

The singular ``<|tool_call_section_begin|>`` spelling is accepted as well.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import CallCollector, TextCalls, arguments_until, skip_space

__all__ = ["parse_kimi_k2"]

SECTION_BEGIN = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
SECTION_END = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_CALL_ID = re.compile(r"(?:functions\.)?(?P<name>.+?)(?::\d+)?")


def parse_kimi_k2(text: str, *, id_salt: str = "") -> TextCalls:
    """Text outside the section is the reply; each call keeps its own id."""
    calls = CallCollector(id_salt)
    begins = [index for marker in SECTION_BEGIN if (index := text.find(marker)) != -1]
    if not begins:
        return calls.result(text)
    first = min(begins)
    pos = skip_space(text, text.index("|>", first) + 2)
    while text.startswith(CALL_BEGIN, pos):
        end = _read_call(text, pos + len(CALL_BEGIN), calls)
        if end is None:
            return calls.result(text[:first] + text[pos:])
        pos = skip_space(text, end)
    for marker in SECTION_END:
        if text.startswith(marker, pos):
            pos += len(marker)
    return calls.result(text[:first] + text[pos:])


def _read_call(text: str, pos: int, calls: CallCollector) -> int | None:
    where = f"{CALL_BEGIN} at position {pos - len(CALL_BEGIN)}"
    argument_begin = text.find(ARGUMENT_BEGIN, pos)
    if argument_begin == -1:
        calls.problem(f"{where}: no {ARGUMENT_BEGIN} (was the output cut off?)")
        return None
    call_id = text[pos:argument_begin].strip()
    matched = _CALL_ID.fullmatch(call_id)
    if matched is None:
        calls.problem(f"{where}: the call has no id of the form functions.NAME:INDEX")
        return None
    arguments, pos = arguments_until(
        text, argument_begin + len(ARGUMENT_BEGIN), (CALL_END, *SECTION_END)
    )
    pos = skip_space(text, pos)
    if not text.startswith(CALL_END, pos) and pos != len(text):
        calls.problem(f"{where}: expected {CALL_END} after the arguments of {call_id!r}")
        return None
    calls.add(matched.group("name"), arguments, call_id)
    return pos + len(CALL_END) if pos < len(text) else pos
