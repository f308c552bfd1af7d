"""gpt-oss harmony messages. A message addressed ``to=functions.NAME`` is a call::

    <|channel|>analysis<|message|>Need the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city": "Paris"}<|call|>

The ``final`` channel (and commentary without a recipient) is the reply text; the
``analysis`` channel is the model's reasoning and is returned apart from it, never
read for calls. A recipient outside ``functions.`` (gpt-oss's built-in ``browser.*``)
is not a tool name and is reported as a problem.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import Reader, arguments_until, first_of, skip_space

__all__ = ["MESSAGE", "read_harmony"]

START = "<|start|>"
MESSAGE = "<|message|>"
ENDS = ("<|call|>", "<|end|>", "<|return|>")
_RECIPIENT = re.compile(r"\bto=([^\s<]*)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


def read_harmony(reader: Reader) -> None:
    """Read message after message; text that is not a complete header stays text."""
    source = reader.source
    while reader.pos < len(source):
        message_start = skip_space(source, reader.pos)
        header_end = source.find(MESSAGE, message_start)
        if header_end == -1:
            break
        start_token = source.rfind(START, message_start, header_end)
        if start_token > message_start:  # text written before the message's header
            reader.text(start_token)
            message_start = start_token
        header_start = message_start
        if source.startswith(START, header_start):
            header_start += len(START)
        header = source[header_start:header_end]
        content_start = header_end + len(MESSAGE)
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            arguments, end = arguments_until(source, content_start, (*ENDS, START))
            name = recipient.group(1).removeprefix("functions.")
            reader.markup(message_start)
            where = f"message to {recipient.group(1)[:80]!r} at position {message_start}"
            reader.call(end, name, arguments, where=where)
        else:
            end, _ = first_of(source, (*ENDS, START), content_start)
            end = len(source) if end == -1 else end
            reader.markup(content_start)
            channel = _CHANNEL.search(header)
            if channel is not None and channel.group(1) == "analysis":
                reader.reasoning(end)
            else:
                reader.text(end)
        end = skip_space(source, reader.pos)
        for marker in ENDS:
            if source.startswith(marker, end):
                reader.markup(end + len(marker))
                break
    reader.text(len(source))
