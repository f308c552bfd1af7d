"""From whatever a tool returned to a `ToolResult` the model can read.

Strings pass as they are; data (dicts, lists, pydantic models, dataclasses) becomes
JSON, never a Python repr; bytes that are an image become an image block; nothing
at all becomes an explicit note, so the model never sees an empty result.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from toolbridge.tool import ImageBlock, JsonBlock, TextBlock, ToolResult

__all__ = ["EMPTY_RESULT", "image_media_type", "to_json_text", "to_tool_result"]

EMPTY_RESULT = "(tool completed with no output)"

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_media_type(data: bytes) -> str | None:
    """The image media type of `data` by its magic bytes, or None."""
    for magic, media_type in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_json_text(value: Any) -> str:
    """JSON for the model: non-ASCII kept, models and dataclasses dumped, the rest str()."""
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


def to_tool_result(value: Any) -> ToolResult:
    """Convert a tool's return value to a `ToolResult`."""
    if isinstance(value, ToolResult):
        content = value.content
        if not (content.strip() if isinstance(content, str) else content):
            value.content = EMPTY_RESULT
        return value
    if isinstance(value, str):
        return ToolResult(value if value.strip() else EMPTY_RESULT)
    if value is None:
        return ToolResult(EMPTY_RESULT)
    if isinstance(value, TextBlock | ImageBlock | JsonBlock):
        return ToolResult([value])
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        media_type = image_media_type(data)
        if media_type is not None:
            return ToolResult([ImageBlock(data, media_type)])
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult(f"(binary output, {len(data)} bytes, not shown)")
        return ToolResult(text if text.strip() else EMPTY_RESULT)
    if _is_block_list(value):
        return ToolResult(list(value) or EMPTY_RESULT)
    return ToolResult(to_json_text(value))


def _is_block_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(item, TextBlock | ImageBlock | JsonBlock) for item in value)
    )
