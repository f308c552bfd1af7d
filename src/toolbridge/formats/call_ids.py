"""Stable ids for tool calls that arrive without one (Gemini, Ollama, raw model text).

An id is a hash of where the call sits in its response and what it says, so parsing
the same response twice gives the same ids (replays and caches stay stable), while two
calls of one response never share an id. Pass a `salt` (a response id, a turn
number) to keep identical calls of different turns apart.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from toolbridge.core.calls import ToolCallRequest

__all__ = ["generated_call_id", "tool_call"]

_ALPHANUMERIC = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, sort_keys=True, default=repr)


def tool_call(
    call_id: Any,
    name: Any,
    arguments: Any,
    position: int,
    extra: Mapping[str, Any] | None = None,
    *,
    salt: str = "",
) -> ToolCallRequest:
    """A `ToolCallRequest` with the provider's id, or, when it sent none, a generated
    stable one flagged ``extra["generated_id"] = True`` (never sent back as if real)."""
    kept = dict(extra or {})
    if not isinstance(call_id, str) or not call_id:
        call_id = generated_call_id(position, str(name), arguments, salt=salt)
        kept["generated_id"] = True
    return ToolCallRequest(call_id, name, arguments, kept)


def generated_call_id(
    position: int, name: str, arguments: Any, *, salt: str = "", alphanumeric9: bool = False
) -> str:
    """A deterministic id: ``call_`` + 24 hex digits, or 9 letters/digits for Mistral.

    Mistral's API rejects any tool call id that is not exactly nine characters from
    ``[a-zA-Z0-9]``, hence `alphanumeric9`.
    """
    text = "\0".join((salt, str(position), name, _canonical(arguments)))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    if alphanumeric9:
        number = int.from_bytes(digest[:8], "big")
        chars = []
        for _ in range(9):
            number, rest = divmod(number, len(_ALPHANUMERIC))
            chars.append(_ALPHANUMERIC[rest])
        return "".join(chars)
    return "call_" + digest.hex()[:24]
