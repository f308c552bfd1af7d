"""From whatever a tool returned to a `ToolResult` the model can read.

Strings pass as they are; data (dicts, lists, pydantic models, dataclasses) becomes
JSON, never a Python repr; bytes that are an image become an image block; nothing
at all becomes an explicit note, so the model never sees an empty result. How long
a result is (`text_length`, `estimate_tokens`) is measured here too; what happens to
one that is too long is `toolbridge.execution.result_store`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolbridge.core.jsontext import to_json_text
from toolbridge.core.tool import ContentBlock, ImageBlock, JsonBlock, TextBlock, ToolResult

__all__ = [
    "EMPTY_RESULT",
    "MalformedResult",
    "check_result",
    "estimate_tokens",
    "image_media_type",
    "text_length",
    "to_tool_result",
]

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


class MalformedResult(TypeError):
    """A tool returned something that cannot become a result the model can read.

    A `ToolResult` whose content is not text or content blocks, a `JsonBlock` whose value
    is not JSON data (tuple keys, a cycle), or data that cannot be written as JSON. The
    call fails with an ``execution_error`` instead of failing later, in a provider format.
    """


def to_tool_result(value: Any) -> ToolResult:
    """Convert a tool's return value to a checked `ToolResult`; `MalformedResult` if it cannot."""
    cls = type(value)
    if cls is str:
        return ToolResult(value if value.strip() else EMPTY_RESULT)
    if cls is int:
        return ToolResult(str(value))
    if isinstance(value, ToolResult):
        return _checked(value)
    if isinstance(value, str):
        return ToolResult(value if value.strip() else EMPTY_RESULT)
    if value is None:
        return ToolResult(EMPTY_RESULT)
    if isinstance(value, TextBlock | ImageBlock | JsonBlock):
        return _checked(ToolResult([value]))
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
        return _checked(ToolResult(list(value)))
    try:
        return ToolResult(to_json_text(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise MalformedResult(
            f"the returned {type(value).__name__} cannot be written as JSON ({exc})"
        ) from None


def _checked(result: ToolResult) -> ToolResult:
    """`result` if every part of it can be sent to a model; empty content becomes a note."""
    content = result.content
    if isinstance(content, str):
        if not content.strip():
            result.content = EMPTY_RESULT
    elif isinstance(content, list | tuple):
        for position, block in enumerate(content):
            problem = _block_problem(block)
            if problem is not None:
                raise MalformedResult(f"content block {position}: {problem}")
        if not content:
            result.content = EMPTY_RESULT
    else:
        raise MalformedResult(
            "ToolResult.content must be a str or a list of TextBlock/ImageBlock/JsonBlock, "
            f"got {type(content).__name__}"
        )
    if type(result.is_error) is not bool:
        raise MalformedResult(f"ToolResult.is_error must be a bool, got {result.is_error!r}")
    if not isinstance(result.metadata, dict):
        raise MalformedResult(
            f"ToolResult.metadata must be a dict, got {type(result.metadata).__name__}"
        )
    return result


def _block_problem(block: Any) -> str | None:
    if isinstance(block, TextBlock):
        return None if isinstance(block.text, str) else "TextBlock.text is not a str"
    if isinstance(block, ImageBlock):
        if not isinstance(block.data, bytes) or not isinstance(block.media_type, str):
            return "ImageBlock needs bytes data and a str media_type"
        return None
    if isinstance(block, JsonBlock):
        try:
            to_json_text(block.value)
        except (TypeError, ValueError, RecursionError) as exc:
            return f"the JsonBlock value cannot be written as JSON ({exc})"
        return None
    return f"expected TextBlock, ImageBlock or JsonBlock, got {type(block).__name__}"


def check_result(result: ToolResult) -> ToolResult:
    """`result`, checked like a tool's own return value (for results a hook supplies)."""
    return _checked(result)


def _is_block_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(item, TextBlock | ImageBlock | JsonBlock) for item in value)
    )


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token), for budgets and previews."""
    return (len(text) + 3) // 4


def _block_chars(block: ContentBlock) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    return len(to_json_text(block.value)) if isinstance(block, JsonBlock) else 0


def text_length(result: ToolResult) -> int:
    """Characters of text `result` would send (images count as nothing)."""
    content = result.content
    if isinstance(content, str):
        return len(content)
    return sum(_block_chars(block) for block in content)
