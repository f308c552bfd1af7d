"""gpt-oss harmony messages. A message addressed ``to=functions.NAME`` is a call::

    <|channel|>analysis<|message|>Need the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city": "Paris"}<|call|>

The ``final`` channel (and commentary without a recipient) is the reply text; the
``analysis`` channel is the model's reasoning and is returned apart from it.
"""

from __future__ import annotations

import re

from toolbridge.formats.text._common import CallCollector, TextCalls, arguments_until, skip_space

__all__ = ["parse_harmony"]

START = "<|start|>"
MESSAGE = "<|message|>"
ENDS = ("<|call|>", "<|end|>", "<|return|>")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


def parse_harmony(text: str, *, id_salt: str = "") -> TextCalls:
    """Read message after message; text that is not a complete header stays text."""
    calls = CallCollector(id_salt)
    replies: list[str] = []
    reasoning: list[str] = []
    pos = 0
    while pos < len(text):
        header_start = pos + len(START) if text.startswith(START, pos) else pos
        header_end = text.find(MESSAGE, header_start)
        if header_end == -1:
            replies.append(text[pos:])
            break
        header = text[header_start:header_end]
        content_start = header_end + len(MESSAGE)
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            arguments, end = arguments_until(text, content_start, (*ENDS, START))
            name = recipient.group(1).removeprefix("functions.")
            calls.add(name, arguments)
        else:
            end = min(
                (i for marker in (*ENDS, START) if (i := text.find(marker, content_start)) != -1),
                default=len(text),
            )
            channel = _CHANNEL.search(header)
            content = text[content_start:end]
            (reasoning if channel and channel.group(1) == "analysis" else replies).append(content)
        end = skip_space(text, end)
        for marker in ENDS:
            if text.startswith(marker, end):
                end += len(marker)
                break
        pos = skip_space(text, end)
    return calls.result(
        "\n".join(part.strip() for part in replies if part.strip()),
        "\n".join(part.strip() for part in reasoning if part.strip()),
    )
