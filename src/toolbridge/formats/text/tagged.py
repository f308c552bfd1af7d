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

from toolbridge.formats.text._common import Reader, scan_json, skip_space

__all__ = ["END", "START", "read_hermes", "read_qwen3_coder"]

START = "<tool_call>"
END = "</tool_call>"
END_TOKENS = ("<|im_end|>", "<|endoftext|>")


def read_hermes(reader: Reader) -> None:
    """Each ``<tool_call>`` holds one JSON object; a ``</tool_call>`` inside a JSON
    string does not end it. A missing end tag is accepted only at the end of the text."""
    source = reader.source
    while (start := source.find(START, reader.pos)) != -1:
        reader.text(start, orphans=(END,))
        where = f"<tool_call> at position {start}"
        found = scan_json(source, start + len(START))
        after = skip_space(source, found[1]) if found else -1
        if found is None or not (source.startswith(END, after) or after == len(source)):
            reader.unreadable(_block_end(source, start), f"{where}: {_why(source, start, found)}")
            continue
        reader.call_object(min(after + len(END), len(source)), found[0], where)
    reader.text(len(source), orphans=(END,))


def _block_end(source: str, start: int) -> int:
    end = source.find(END, start + len(START))
    return len(source) if end == -1 else end + len(END)


def _why(source: str, start: int, found: tuple[str, int] | None) -> str:
    if source.find(END, start) == -1:
        return "the block is not closed with </tool_call> (was the output cut off?)"
    if found is None:
        return "the block does not hold one complete JSON object"
    return "there is text between the JSON object and </tool_call>"


_FUNCTION = re.compile(r"<function=([^>\n]*)>")
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>")
# A value ends at the </parameter> that is followed by the next parameter or the end
# of the function, so "</parameter>" written inside a value does not cut it short.
_VALUE_END = re.compile(r"</parameter>(?=\s*(?:<parameter=|</function>))")
_UNCLOSED_VALUE_END = re.compile(r"(?=<parameter=|</function>)")


def read_qwen3_coder(reader: Reader) -> None:
    """``<tool_call><function=NAME><parameter=KEY>VALUE</parameter>…</function></tool_call>``.

    Values are kept as text without their framing newlines; the registry casts
    ``"3"`` to 3 or decodes ``'{"a": 1}'`` only where the tool's schema asks for it.
    """
    source = reader.source
    while (start := source.find(START, reader.pos)) != -1:
        reader.text(start, orphans=(END, "</function>"))
        _read_function(reader, start)
    reader.text(len(source), orphans=(END, "</function>"))


def _read_function(reader: Reader, start: int) -> None:
    source = reader.source
    where = f"<tool_call> at position {start}"
    function = _FUNCTION.match(source, skip_space(source, start + len(START)))
    if function is None:
        why = "expected <function=NAME> right after <tool_call>"
        reader.unreadable(_block_end(source, start), f"{where}: {why}")
        return
    arguments: dict[str, str] = {}
    pos = skip_space(source, function.end())
    while (parameter := _PARAMETER.match(source, pos)) is not None:
        key = parameter.group(1).strip()
        value_end = _VALUE_END.search(source, parameter.end())
        if value_end is None:
            value_end = _UNCLOSED_VALUE_END.search(source, parameter.end())
        if value_end is None:
            why = f"parameter {key!r} is not closed (was the output cut off?)"
            reader.unreadable(_block_end(source, start), f"{where}: {why}")
            return
        if key in arguments:
            why = f"parameter {key!r} is given twice; give each once"
            reader.unreadable(_block_end(source, start), f"{where}: {why}")
            return
        arguments[key] = _strip_framing(source[parameter.end() : value_end.start()])
        pos = skip_space(source, value_end.end())
    if not source.startswith("</function>", pos):
        why = "expected <parameter=KEY> or </function> after the function's name"
        reader.unreadable(_block_end(source, start), f"{where}: {why}")
        return
    pos = skip_space(source, pos + len("</function>"))
    if source.startswith(END, pos):
        pos += len(END)
    elif pos != len(source):
        why = "expected </tool_call> after </function>"
        reader.unreadable(_block_end(source, start), f"{where}: {why}")
        return
    reader.call(pos, function.group(1).strip(), arguments, where=where)


def _strip_framing(value: str) -> str:
    """Drop the one newline the format puts on each side of a value, nothing more."""
    value = value.removeprefix("\n")
    return value.removesuffix("\n")
