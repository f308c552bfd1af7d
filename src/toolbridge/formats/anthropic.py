"""Anthropic Messages: ``input_schema`` tools out, ``tool_use`` blocks in, ``tool_result``
blocks back.

Anthropic takes full JSON Schema, so definitions send the tool's schema unchanged.
All results of one assistant turn go back in one user message, one ``tool_result``
block per call with ``is_error`` set, text and images as content blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolbridge.calls import ToolCallRequest
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.types import (
    FormatError,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    ToolSpec,
    as_payload,
    result_parts,
    tool_specs,
)
from toolbridge.schema import thaw
from toolbridge.tool import ImageBlock

__all__ = [
    "definitions",
    "parse_definitions",
    "parse_response",
    "result_blocks",
    "result_messages",
]

TRUNCATION_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})


def definitions(tools: ToolSource) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{"name", "description", "input_schema"}`` per tool."""
    return [
        {"name": s.name, "description": s.description, "input_schema": thaw(s.parameters)}
        for s in tool_specs(tools)
    ]


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back into `ToolSpec`s."""
    specs = []
    for index, item in enumerate(tools):
        name, schema = item.get("name"), item.get("input_schema")
        if not isinstance(name, str) or not isinstance(schema, Mapping):
            raise FormatError(f'tools[{index}] needs a "name" and an "input_schema" object')
        specs.append(ToolSpec(name, item.get("description") or "", schema))
    return specs


def parse_response(payload: Any, *, id_salt: str = "") -> ParsedResponse:
    """A Messages API response -> text and ``tool_use`` calls (``input`` as sent)."""
    data = as_payload(payload, "Anthropic")
    content = data.get("content")
    if not isinstance(content, list):
        raise FormatError('an Anthropic message needs a "content" list of blocks')
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise FormatError(f"content[{index}] is not an object")
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            calls.append(_call(block, len(calls), id_salt))
    stop = data.get("stop_reason")
    return ParsedResponse(
        text="".join(texts),
        calls=tuple(calls),
        finish_reason=stop,
        truncated=stop in TRUNCATION_REASONS,
        raw=data,
    )


def _call(block: Mapping[str, Any], position: int, salt: str) -> ToolCallRequest:
    return tool_call(
        block.get("id"), block.get("name", ""), block.get("input"), position, salt=salt
    )


def result_blocks(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks, in call order, for callers building their own message."""
    blocks = []
    for outcome in outcomes:
        parts = result_parts(outcome.result)
        content: str | list[dict[str, Any]]
        if len(parts) == 1 and not isinstance(parts[0], ImageBlock):
            content = parts[0].text
        else:
            content = [_content_block(p) for p in parts]
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": outcome.call.id,
                "content": content,
                "is_error": outcome.result.is_error,
            }
        )
    return blocks


def _content_block(part: Any) -> dict[str, Any]:
    if isinstance(part, ImageBlock):
        source = {"type": "base64", "media_type": part.media_type, "data": part.base64}
        return {"type": "image", "source": source}
    return {"type": "text", "text": part.text}


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One user message holding every ``tool_result`` block of the turn (none: empty)."""
    blocks = result_blocks(outcomes)
    return [{"role": "user", "content": blocks}] if blocks else []
