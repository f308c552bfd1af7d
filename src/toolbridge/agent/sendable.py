"""The conversation as a provider can be sent it: no lone surrogate anywhere.

JSON lets a model send ``"\\udc80"``, and a file name decoded with ``surrogateescape``
holds one too: a Python string with a lone surrogate, which UTF-8 cannot encode. In the
history (a tool name, arguments, an answer, a result) it made every later request
fail to encode, which ended the run. The calls themselves run as the model sent them
(the registry refuses such arguments with an error the model reads); only what is
sent back is changed: each surrogate becomes the six characters ``\\udc80``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from toolbridge.agent.messages import Message
from toolbridge.calls import ToolCallRequest

__all__ = ["Sendable"]

_SURROGATE = re.compile("[\ud800-\udfff]")

T = TypeVar("T")


class Sendable:
    """One run's conversation made sendable turn by turn: each turn checks only the
    messages added since the last (as `RenderCache` renders them), unless the list was
    changed before them; then all again."""

    def __init__(self) -> None:
        self._checked = 0
        self._last: Message | None = None

    def __call__(self, messages: list[Message]) -> list[Message]:
        """`messages` with every lone surrogate escaped, in place (an escaped message
        stays the same object from then on: the adapters' render cache keeps it)."""
        start = self._checked
        if start > len(messages) or (start and messages[start - 1] is not self._last):
            start = 0
        for index in range(start, len(messages)):
            try:
                escaped = _escaped(messages[index], _as_text)
            except RecursionError:  # nested past Python's limit: sent as it is (the
                continue  # provider's SDK reports what it cannot encode)
            messages[index] = escaped
        self._checked = len(messages)
        self._last = messages[-1] if messages else None
        return messages


def _encodable(text: str) -> bool:
    """Whether `text` holds no surrogate (ASCII is checked without a copy; the rest is
    encoded, in C, which is many times faster than searching it)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _as_text(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def _arguments_text(text: str) -> str:
    """Arguments' JSON text, which an adapter may parse to send an object: a surrogate
    JSON decodes (``"\\udc80"``, or the character itself) is written so that it reads
    back as the six characters, not as the surrogate; the same text when there is none."""
    if "\\u" not in text and _encodable(text):
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON (or too deep): sent as text
        return _escaped(text, _as_text)
    escaped = _escaped(value, _as_text)
    return text if escaped is value else json.dumps(escaped, ensure_ascii=False)


def _escaped(value: T, write: Callable[[re.Match[str]], str]) -> T:
    """`value` with its strings' surrogates written by `write` (the same object when it
    has none): strings, mappings, lists, tuples and dataclasses, walked."""
    result: Any = value
    if isinstance(value, str):
        if not _encodable(value):
            result = _SURROGATE.sub(write, value)
    elif isinstance(value, Mapping):
        pairs = [(_escaped(key, write), _escaped(item, write)) for key, item in value.items()]
        if any(
            key is not old_key or item is not old_item
            for (key, item), (old_key, old_item) in zip(pairs, value.items(), strict=True)
        ):
            result = dict(pairs)
    elif isinstance(value, list | tuple):
        items = [_escaped(item, write) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            result = list(items) if isinstance(value, list) else tuple(items)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            field.name: _escaped(getattr(value, field.name), write)
            for field in dataclasses.fields(value)
            if field.init
        }
        if isinstance(value, ToolCallRequest) and isinstance(value.arguments, str):
            fields["arguments"] = _arguments_text(value.arguments)
        if any(new is not getattr(value, name) for name, new in fields.items()):
            result = dataclasses.replace(value, **fields)
    return result  # type: ignore[no-any-return]
