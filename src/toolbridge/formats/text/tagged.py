"""``<tool_call>`` dialects: Hermes/Qwen JSON bodies and Qwen3-Coder's XML-style body.

Hermes / Qwen2.5 / Qwen3::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Qwen3-Coder (parameter values are raw text; the registry casts them by schema)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import CallCollector, TextCalls, scan_json, skip_space

__all__ = ["parse_hermes", "parse_qwen3_coder"]

START = "<tool_call>"
END = "</tool_call>"


def parse_hermes(text: str, *, id_salt: str = "") -> TextCalls:
    """Each ``<tool_call>`` holds one JSON object; a ``</tool_call>`` inside a JSON
    string does not end it. A missing end tag is accepted only at the end of the text."""
    calls = CallCollector(id_salt)
    kept: list[str] = []
    pos = 0
    while (start := text.find(START, pos)) != -1:
        kept.append(text[pos:start])
        where = f"<tool_call> at position {start}"
        found = scan_json(text, start + len(START))
        after = skip_space(text, found[1]) if found else -1
        closed = found is not None and (text.startswith(END, after) or after == len(text))
        if found is None or not closed:
            block_end = _block_end(text, start)
            calls.problem(f"{where}: {_why_unreadable(text, start, found is None)}")
            kept.append(text[start:block_end])
            pos = block_end
            continue
        if not calls.add_object(found[0], where):
            kept.append(text[start : after + len(END)])
        pos = min(after + len(END), len(text))
    kept.append(text[pos:])
    return calls.result("".join(kept))


def _block_end(text: str, start: int) -> int:
    end = text.find(END, start)
    return len(text) if end == -1 else end + len(END)


def _why_unreadable(text: str, start: int, no_json: bool) -> str:
    if text.find(END, start) == -1:
        return "the block is not closed with </tool_call> (was the output cut off?)"
    if no_json:
        return "the block does not hold one complete JSON object"
    return "there is text between the JSON object and </tool_call>"


_FUNCTION = re.compile(r"<function=([^>\n]+)>")
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>")
# A value ends at the </parameter> that is followed by the next parameter or the end
# of the function, so "</parameter>" written inside a value does not cut it short.
_VALUE_END = re.compile(r"</parameter>(?=\s*(?:<parameter=|</function>))")
_UNCLOSED_VALUE_END = re.compile(r"(?=<parameter=|</function>)")


def parse_qwen3_coder(text: str, *, id_salt: str = "") -> TextCalls:
    """``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>…</function></tool_call>``.

    Values are kept as text without their framing newlines; the registry casts
    ``"3"`` to 3 or decodes ``'{"a": 1}'`` only where the tool's schema asks for it.
    """
    calls = CallCollector(id_salt)
    kept: list[str] = []
    pos = 0
    while (start := text.find(START, pos)) != -1:
        kept.append(text[pos:start])
        end = _read_function(text, start, calls)
        if end is None:
            end = _block_end(text, start)
            kept.append(text[start:end])
        pos = end
    kept.append(text[pos:])
    return calls.result("".join(kept))


def _read_function(text: str, start: int, calls: CallCollector) -> int | None:
    """Parse one block into `calls`; the end of the block, or None after a problem."""
    where = f"<tool_call> at position {start}"
    function = _FUNCTION.match(text, skip_space(text, start + len(START)))
    if function is None:
        calls.problem(f"{where}: expected <function=NAME> right after <tool_call>")
        return None
    arguments: dict[str, str] = {}
    pos = skip_space(text, function.end())
    while (parameter := _PARAMETER.match(text, pos)) is not None:
        key = parameter.group(1).strip()
        value_end = _VALUE_END.search(text, parameter.end())
        if value_end is None:
            value_end = _UNCLOSED_VALUE_END.search(text, parameter.end())
        if value_end is None:
            calls.problem(f"{where}: parameter {key!r} is not closed (was the output cut off?)")
            return None
        if key in arguments:
            calls.problem(f"{where}: parameter {key!r} is given twice; give each once")
            return None
        arguments[key] = _strip_framing(text[parameter.end() : value_end.start()])
        pos = skip_space(text, value_end.end())
    if not text.startswith("</function>", pos):
        calls.problem(f"{where}: expected </function> after the parameters")
        return None
    pos = skip_space(text, pos + len("</function>"))
    if text.startswith(END, pos):
        pos += len(END)
    elif pos != len(text):
        calls.problem(f"{where}: expected </tool_call> after </function>")
        return None
    calls.add(function.group(1).strip(), arguments)
    return pos


def _strip_framing(value: str) -> str:
    """Drop the one newline the format puts on each side of a value, nothing more."""
    value = value.removeprefix("\n")
    return value.removesuffix("\n")
