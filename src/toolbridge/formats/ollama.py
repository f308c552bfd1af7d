"""Ollama native chat API (``/api/chat``): OpenAI-shaped tools out, ``tool_calls`` with
object arguments in, ``role: tool`` messages with ``tool_name`` back.

Ollama passes the schema to the model's chat template as is, so definitions send it
unchanged. Note that the ``ollama`` Python client re-validates tools through its own
model, which keeps only ``type``, ``items``, ``description`` and ``enum`` of each
property; send these definitions over HTTP (or accept that loss) when constraints
matter. Calls usually come without an id and get a generated one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.openai_chat import parse_definitions
from toolbridge.formats.types import (
    FormatError,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    as_payload,
    result_parts,
    tool_specs,
)
from toolbridge.schema import thaw
from toolbridge.tool import ImageBlock

__all__ = ["definitions", "parse_definitions", "parse_response", "result_messages"]

TRUNCATION_REASONS = frozenset({"length"})


def definitions(tools: ToolSource) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{"type": "function", "function": ...}`` per tool."""
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": thaw(s.parameters),
            },
        }
        for s in tool_specs(tools)
    ]


def parse_response(payload: Any, *, id_salt: str = "") -> ParsedResponse:
    """A non-streamed ``/api/chat`` response -> text (thinking left out) and calls."""
    data = as_payload(payload, "Ollama")
    message = data.get("message")
    if not isinstance(message, dict):
        raise FormatError('an Ollama chat response needs a "message" object')
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise FormatError('"tool_calls" must be a list')
    calls = []
    for position, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            raise FormatError(f'tool_calls[{position}] has no "function" object')
        name, arguments = function.get("name", ""), function.get("arguments")
        calls.append(tool_call(raw.get("id"), name, arguments, position, salt=id_salt))
    done_reason = data.get("done_reason")
    content = message.get("content")
    return ParsedResponse(
        text=content if isinstance(content, str) else "",
        calls=tuple(calls),
        finish_reason=done_reason,
        truncated=done_reason in TRUNCATION_REASONS,
        raw=data,
    )


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One ``role: tool`` message per outcome, named by ``tool_name``; images base64."""
    messages = []
    for outcome in outcomes:
        parts = result_parts(outcome.result)
        texts = [p.text for p in parts if not isinstance(p, ImageBlock)]
        images = [p.base64 for p in parts if isinstance(p, ImageBlock)]
        message: dict[str, Any] = {
            "role": "tool",
            "content": "\n".join(texts) or f"({len(images)} image(s) attached)",
            "tool_name": outcome.call.name,
        }
        if images:
            message["images"] = images
        messages.append(message)
    return messages
