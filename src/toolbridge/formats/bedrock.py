"""AWS Bedrock Converse: ``toolSpec`` tools out, ``toolUse`` blocks in, ``toolResult``
blocks with a ``status`` back.

Shapes follow the Converse API reference. Definitions go inside
``toolConfig={"tools": definitions(...)}`` with the schema unchanged under
``inputSchema.json``. Image bytes are raw ``bytes`` by default, as boto3 wants
them; pass ``base64_images=True`` for the JSON wire form of the HTTP API.
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
from toolbridge.tool import ImageBlock, JsonBlock

__all__ = ["definitions", "parse_definitions", "parse_response", "result_messages"]

TRUNCATION_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif"}
_IMAGE_FORMATS["image/webp"] = "webp"


def definitions(tools: ToolSource) -> list[dict[str, Any]]:
    """The ``toolConfig.tools`` list: ``{"toolSpec": {name, description, inputSchema}}``."""
    return [
        {
            "toolSpec": {
                "name": s.name,
                "description": s.description,
                "inputSchema": {"json": thaw(s.parameters)},
            }
        }
        for s in tool_specs(tools)
    ]


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``toolConfig.tools`` list back into `ToolSpec`s."""
    specs = []
    for index, item in enumerate(tools):
        spec = item.get("toolSpec")
        schema = spec.get("inputSchema", {}).get("json") if isinstance(spec, Mapping) else None
        if not isinstance(spec, Mapping) or not isinstance(schema, Mapping):
            raise FormatError(f'tools[{index}] needs a "toolSpec" with "inputSchema.json"')
        specs.append(ToolSpec(str(spec.get("name")), spec.get("description") or "", schema))
    return specs


def parse_response(payload: Any, *, id_salt: str = "") -> ParsedResponse:
    """A ``Converse`` response -> text and ``toolUse`` calls (``input`` as sent)."""
    data = as_payload(payload, "Bedrock Converse")
    output = data.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        raise FormatError('a Converse response needs "output.message.content" as a list')
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise FormatError(f"content[{index}] is not an object")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, dict):
            name, arguments = use.get("name", ""), use.get("input")
            calls.append(tool_call(use.get("toolUseId"), name, arguments, len(calls), salt=id_salt))
    stop = data.get("stopReason")
    return ParsedResponse(
        text="".join(texts),
        calls=tuple(calls),
        finish_reason=stop,
        truncated=stop in TRUNCATION_REASONS,
        raw=data,
    )


def result_messages(
    outcomes: Iterable[ToolOutcomeLike], *, base64_images: bool = False
) -> list[dict[str, Any]]:
    """One user message of ``toolResult`` blocks, ``status`` success or error (none: empty)."""
    blocks = [
        {
            "toolResult": {
                "toolUseId": o.call.id,
                "content": _content(o, base64_images),
                "status": "error" if o.result.is_error else "success",
            }
        }
        for o in outcomes
    ]
    return [{"role": "user", "content": blocks}] if blocks else []


def _content(outcome: ToolOutcomeLike, base64_images: bool) -> list[dict[str, Any]]:
    content = outcome.result.content
    if not isinstance(content, str) and len(content) == 1 and isinstance(content[0], JsonBlock):
        value = content[0].value
        if isinstance(value, dict):  # Converse's json block takes an object only
            return [{"json": value}]
    blocks: list[dict[str, Any]] = []
    for part in result_parts(outcome.result):
        if isinstance(part, ImageBlock) and part.media_type in _IMAGE_FORMATS:
            data: bytes | str = part.base64 if base64_images else part.data
            image = {"format": _IMAGE_FORMATS[part.media_type], "source": {"bytes": data}}
            blocks.append({"image": image})
        elif isinstance(part, ImageBlock):
            blocks.append({"text": f"[image of type {part.media_type} not supported here]"})
        else:
            blocks.append({"text": part.text})
    return blocks
