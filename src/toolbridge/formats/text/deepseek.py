"""DeepSeek V3 and V3.1 tool calls, with their full-width ``｜`` and ``▁`` markers.

V3 (and R1)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1: ``<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>``.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import Reader, arguments_until, first_of, skip_space

__all__ = ["CALL_BEGIN", "read_deepseek"]

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
END_TOKENS = ("<｜end▁of▁sentence｜>",)
_V3_NAME = re.compile(r"([^\n`<]*?)\s*```(?:json)?\s*")
_FENCE_END = re.compile(r"\s*```")


def read_deepseek(reader: Reader) -> None:
    """Text around the calls section is the reply; each call is read between its markers."""
    source = reader.source
    orphans = (CALL_END, CALLS_END, SEP)
    while True:
        begin, marker = first_of(source, (CALLS_BEGIN, CALL_BEGIN), reader.pos)
        if not marker:
            break
        reader.text(begin, orphans=orphans)
        if marker == CALLS_BEGIN:
            reader.markup(begin + len(CALLS_BEGIN))
        while source.startswith(CALL_BEGIN, pos := skip_space(source, reader.pos)):
            reader.markup(pos)
            if not _read_call(reader):
                break
        pos = skip_space(source, reader.pos)
        if source.startswith(CALLS_END, pos):
            reader.markup(pos + len(CALLS_END))
    reader.text(len(source), orphans=orphans)


def _read_call(reader: Reader) -> bool:
    """One call from ``<｜tool▁call▁begin｜>``; False (after a problem) when unreadable."""
    source = reader.source
    start = reader.pos
    where = f"{CALL_BEGIN} at position {start}"
    pos = start + len(CALL_BEGIN)
    call_end = source.find(CALL_END, pos)
    unreadable_end = len(source) if call_end == -1 else call_end + len(CALL_END)
    sep = source.find(SEP, pos)
    if sep == -1:
        reader.unreadable(unreadable_end, f"{where}: no {SEP} after the call's start")
        return False
    head = source[pos:sep].strip()
    pos = sep + len(SEP)
    if head == "function":  # V3: the name follows the separator, the JSON is fenced
        named = _V3_NAME.match(source, pos)
        if named is None:
            why = "expected the tool name and a ```json fence"
            reader.unreadable(unreadable_end, f"{where}: {why}")
            return False
        name = named.group(1).strip()
        arguments, pos = arguments_until(source, named.end(), ("```", CALL_END))
        fence = _FENCE_END.match(source, pos)
        pos = fence.end() if fence else pos
    else:
        name = head
        arguments, pos = arguments_until(source, pos, (CALL_END,))
    pos = skip_space(source, pos)
    if source.startswith(CALL_END, pos):
        pos += len(CALL_END)
    elif pos != len(source):
        why = f"expected {CALL_END} after the arguments of {name[:80]!r}"
        reader.unreadable(unreadable_end, f"{where}: {why}")
        return False
    # When cut off, the registry tells the model that its JSON is incomplete.
    return reader.call(pos, name, arguments, where=where)
