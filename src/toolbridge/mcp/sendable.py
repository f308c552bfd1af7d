"""What the MCP server sends, made encodable: no lone surrogate in any string.

A plugin's result or description, a file name decoded with ``surrogateescape``, or an
upstream server's JSON ``"\\udc80"`` can hold a lone surrogate, which no transport can
write (pydantic: 'surrogates not allowed'): one such result ended the whole server and
left its clients waiting. Each is sent as the six characters ``\\udc80``, as the
command line's ``--json`` and the agent write it.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["sendable"]

_SURROGATE = re.compile("[\ud800-\udfff]")

T = TypeVar("T")


def _as_text(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def sendable(value: T) -> T:
    """`value` (a pydantic model, or strings in lists and dicts) with each lone surrogate
    written as text; the same object when it holds none, so the common case copies
    nothing."""
    result: Any = value
    if isinstance(value, str):
        if not value.isascii() and _SURROGATE.search(value):
            result = _SURROGATE.sub(_as_text, value)
    elif isinstance(value, BaseModel):
        changed = {
            name: new for name, old in vars(value).items() if (new := sendable(old)) is not old
        }
        extra = value.__pydantic_extra__
        new_extra = sendable(extra) if extra else extra
        if changed or new_extra is not extra:
            result = value.model_copy(update=changed)
            if new_extra is not extra:
                result.__pydantic_extra__ = new_extra
    elif isinstance(value, dict):
        items = [(sendable(key), sendable(item)) for key, item in value.items()]
        if any(
            k is not a or v is not b for (k, v), (a, b) in zip(items, value.items(), strict=True)
        ):
            result = dict(items)
    elif isinstance(value, list | tuple):
        values = [sendable(item) for item in value]
        if any(new is not old for new, old in zip(values, value, strict=True)):
            result = type(value)(values)
    return result  # type: ignore[no-any-return]
