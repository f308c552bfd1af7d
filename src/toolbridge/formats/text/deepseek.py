"""DeepSeek V3 and V3.1 tool calls, with their full-width ``｜`` and ``▁`` markers.

V3::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1: ``<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>``.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import CallCollector, TextCalls, arguments_until, skip_space

__all__ = ["parse_deepseek"]

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
END_OF_SENTENCE = "<｜end▁of▁sentence｜>"
_V3_NAME = re.compile(r"([^\n`<]+?)\s*```(?:json)?\s*")
_FENCE_END = re.compile(r"\s*```")


def parse_deepseek(text: str, *, id_salt: str = "") -> TextCalls:
    """Text before the calls section is the reply; each call is read between its markers."""
    calls = CallCollector(id_salt)
    first = text.find(CALLS_BEGIN)
    if first == -1:
        first = text.find(CALL_BEGIN)
    if first == -1:
        return calls.result(text)
    pos = skip_space(
        text, first + len(CALLS_BEGIN) if text.startswith(CALLS_BEGIN, first) else first
    )
    while text.startswith(CALL_BEGIN, pos):
        end = _read_call(text, pos + len(CALL_BEGIN), calls)
        if end is None:
            return calls.result(text[:first] + text[pos:])
        pos = skip_space(text, end)
    if text.startswith(CALLS_END, pos):
        pos += len(CALLS_END)
    return calls.result(text[:first] + text[pos:].replace(END_OF_SENTENCE, ""))


def _read_call(text: str, pos: int, calls: CallCollector) -> int | None:
    where = f"{CALL_BEGIN} at position {pos - len(CALL_BEGIN)}"
    sep = text.find(SEP, pos)
    if sep == -1:
        calls.problem(f"{where}: no {SEP} after the call's start (was the output cut off?)")
        return None
    head = text[pos:sep].strip()
    pos = sep + len(SEP)
    if head == "function":  # V3: the name follows the separator, the JSON is fenced
        named = _V3_NAME.match(text, pos)
        if named is None:
            calls.problem(f"{where}: expected the tool name and a ```json fence")
            return None
        name = named.group(1).strip()
        arguments, pos = arguments_until(text, named.end(), ("```", CALL_END))
        fence = _FENCE_END.match(text, pos)
        pos = fence.end() if fence else pos
    else:
        name = head
        arguments, pos = arguments_until(text, pos, (CALL_END,))
    pos = skip_space(text, pos)
    if text.startswith(CALL_END, pos) or pos == len(text):
        # When cut off, the registry tells the model that its JSON is incomplete.
        calls.add(name, arguments)
        return pos + len(CALL_END) if pos < len(text) else pos
    calls.problem(f"{where}: expected {CALL_END} after the arguments of {name!r}")
    return None
