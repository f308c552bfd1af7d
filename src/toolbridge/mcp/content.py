"""Tool results between MCP and toolbridge, in both directions.

MCP -> toolbridge (`from_mcp_result`): text and images become `TextBlock` and
`ImageBlock`; audio, resource links and embedded resources become a text block that
says what they are (with an embedded text resource's text, and an embedded image as an
image), and the exact MCP content is kept in ``metadata["mcp.content"]`` so nothing is
lost when toolbridge serves the result on (`to_mcp_content`). ``structuredContent`` is
kept in ``metadata["mcp.structured_content"]``, and as a `JsonBlock` in place of the
JSON text that repeats it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

import mcp_types as mt

from toolbridge.core.errors import ErrorKind
from toolbridge.core.jsontext import to_json_text
from toolbridge.core.sendable import sendable
from toolbridge.core.tool import ContentBlock, ImageBlock, JsonBlock, TextBlock, ToolResult

__all__ = [
    "CONTENT_KEY",
    "ERROR_KIND_META",
    "STRUCTURED_KEY",
    "from_mcp_result",
    "to_mcp_content",
]

CONTENT_KEY = "mcp.content"
ERROR_KIND_META = "toolbridge/error_kind"
"""``_meta`` key of an error result: toolbridge's `ErrorKind`, kept across an MCP hop."""
STRUCTURED_KEY = "mcp.structured_content"
_DIGEST_KEY = "mcp.content_digest"
_LOSSLESS = (mt.TextContent, mt.ImageContent)


def from_mcp_result(result: mt.CallToolResult, *, server: str, tool: str) -> ToolResult:
    """A `ToolResult` for an MCP ``CallToolResult``; ``isError`` makes it an error result."""
    blocks = [_block(item) for item in result.content]
    structured = result.structured_content
    metadata: dict[str, Any] = {}
    lossy = not all(isinstance(item, _LOSSLESS) for item in result.content)
    if lossy:
        metadata[CONTENT_KEY] = [  # a lone surrogate in a key was dumped as U+FFFD
            sendable(item, models=True).model_dump(by_alias=True, mode="json", exclude_none=True)
            for item in result.content
        ]
    if structured is not None:
        metadata[STRUCTURED_KEY] = structured
        # Servers repeat structured content as JSON text (the spec asks them to): that
        # text becomes the typed JSON block; other content stays as the server wrote it.
        if not blocks:
            blocks = [JsonBlock(structured)]
        else:
            blocks = [JsonBlock(structured) if _same_json(b, structured) else b for b in blocks]
    if lossy:  # what the original content stands for; a capped or annotated result differs
        metadata[_DIGEST_KEY] = _digest(ToolResult(blocks))
    if result.is_error:
        detail = ToolResult(blocks).text.strip() if blocks else "no details"
        detail = detail.removeprefix("Error:").strip()
        text = f"Error: MCP server {server!r} reported that tool {tool!r} failed: {detail}"
        return ToolResult(text, is_error=True, error_kind=_error_kind(result), metadata=metadata)
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return ToolResult(blocks[0].text, metadata=metadata)
    return ToolResult(blocks, metadata=metadata)


def _digest(result: ToolResult) -> str:
    return hashlib.sha256(result.text.encode("utf-8", "surrogatepass")).hexdigest()


def _error_kind(result: mt.CallToolResult) -> ErrorKind:
    kind = (result.meta or {}).get(ERROR_KIND_META)
    try:
        return ErrorKind(kind) if isinstance(kind, str) else ErrorKind.EXECUTION_ERROR
    except ValueError:
        return ErrorKind.EXECUTION_ERROR


def _same_json(block: ContentBlock, value: Any) -> bool:
    if not isinstance(block, TextBlock):
        return False
    try:
        return bool(json.loads(block.text) == value)
    except ValueError:
        return False


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _block(item: Any) -> ContentBlock:
    if isinstance(item, mt.TextContent):
        return TextBlock(item.text)
    if isinstance(item, mt.ImageContent):
        data = _decode(item.data)
        if data is None:
            return TextBlock(f"[image: {item.mime_type}, not valid base64]")
        return ImageBlock(data, item.mime_type)
    if isinstance(item, mt.AudioContent):
        size = len(_decode(item.data) or b"")
        return TextBlock(f"[audio: {item.mime_type}, {size} bytes]")
    if isinstance(item, mt.ResourceLink):
        parts = [f"[resource link: {item.name} <{item.uri}>"]
        if item.mime_type:
            parts.append(f" ({item.mime_type})")
        if item.description:
            parts.append(f": {item.description}")
        return TextBlock("".join(parts) + "]")
    if isinstance(item, mt.EmbeddedResource):
        resource = item.resource
        mime = f" ({resource.mime_type})" if resource.mime_type else ""
        if isinstance(resource, mt.TextResourceContents):
            return TextBlock(f"[resource {resource.uri}{mime}]\n{resource.text}")
        data = _decode(resource.blob) or b""
        if resource.mime_type and resource.mime_type.startswith("image/") and data:
            return ImageBlock(data, resource.mime_type)
        return TextBlock(f"[resource {resource.uri}{mime}: {len(data)} bytes of binary data]")
    return TextBlock(f"[unsupported MCP content: {type(item).__name__}]")


# --- toolbridge -> MCP ------------------------------------------------------------------


def to_mcp_content(result: ToolResult) -> list[mt.ContentBlock]:
    """The MCP content of a `ToolResult` (the original MCP content when it came from one)."""
    original = result.metadata.get(CONTENT_KEY)
    if isinstance(original, list) and result.metadata.get(_DIGEST_KEY) == _digest(result):
        return [_CONTENT.validate_python(item) for item in original]
    if isinstance(result.content, str):
        return [mt.TextContent(type="text", text=result.content)]
    content: list[mt.ContentBlock] = []
    for block in result.content:
        if isinstance(block, ImageBlock):
            content.append(
                mt.ImageContent(type="image", data=block.base64, mime_type=block.media_type)
            )
        elif isinstance(block, JsonBlock):
            content.append(mt.TextContent(type="text", text=to_json_text(block.value)))
        else:
            content.append(mt.TextContent(type="text", text=block.text))
    return content


def _content_adapter() -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(mt.ContentBlock)


_CONTENT = _content_adapter()
