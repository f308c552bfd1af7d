"""The neutral conversation: what was said, by whom, independent of any provider's wire.

An `AssistantMessage` keeps the whole turn as the provider sent it (text, calls,
reasoning text and the provider-opaque items in order), so the adapter of the same
provider replays it exactly: thinking blocks and their signatures, Gemini thought
signatures, Responses reasoning items. `ToolResultsMessage` holds the results of one
turn's calls, in call order. Every message is a frozen dataclass that round-trips
through plain JSON (`message_to_json` / `message_from_json`), so a run saved in one
process resumes in another.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind
from toolbridge.core.frozen import thaw
from toolbridge.core.tool import ContentBlock, ImageBlock, JsonBlock, TextBlock, ToolResult
from toolbridge.formats.types import ParsedResponse, TurnPart

__all__ = [
    "AssistantMessage",
    "Message",
    "SystemMessage",
    "ToolResultsMessage",
    "ToolReturn",
    "Usage",
    "UserMessage",
    "message_from_json",
    "message_to_json",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one model turn (or a whole run, summed) used, as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.requests + other.requests,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "requests": self.requests,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        return cls(**{key: int(data.get(key, 0)) for key in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions for the model (a system or developer message, or ``system=``)."""

    text: str
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user said."""

    text: str
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model turn: text, tool calls, reasoning, and the turn's parts in order.

    `parts` is `ParsedResponse.parts`: text segments, call indexes and opaque items.
    Opaque items are only meaningful to the provider whose wire `format` names; an
    adapter of another format drops them and replays the text and calls.
    `truncated` is True when the provider cut the turn off (max tokens).
    """

    text: str = ""
    calls: tuple[ToolCallRequest, ...] = ()
    parts: tuple[TurnPart, ...] | None = None
    reasoning: str = ""
    format: str | None = None
    model: str | None = None
    finish_reason: str | None = None
    truncated: bool = False
    role: Literal["assistant"] = "assistant"

    def parsed(self, format: str) -> ParsedResponse:
        """The turn as `toolbridge.formats` renders it for `format` (opaque items only
        when the turn came from that same format)."""
        parts = self.parts
        if parts is not None and self.format != format:
            parts = tuple(part for part in parts if part.kind != "opaque")
        return ParsedResponse(
            self.text, self.calls, self.finish_reason, self.truncated, None, parts
        )


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """One call and what goes back to the model for it (the shape `formats` renders)."""

    call: ToolCallRequest
    result: ToolResult


@dataclass(frozen=True, slots=True)
class ToolResultsMessage:
    """The results of one assistant turn's calls, in call order."""

    results: tuple[ToolReturn, ...] = field(default_factory=tuple)
    role: Literal["tool"] = "tool"


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultsMessage


# --- JSON -----------------------------------------------------------------------------


def _call_to_json(call: ToolCallRequest) -> dict[str, Any]:
    return {
        "id": call.id,
        "name": call.name,
        "arguments": thaw(call.arguments),
        "extra": thaw(call.extra),
    }


def _call_from_json(data: Mapping[str, Any]) -> ToolCallRequest:
    return ToolCallRequest(
        str(data["id"]), str(data["name"]), data.get("arguments"), dict(data.get("extra") or {})
    )


def _block_to_json(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        data = base64.b64encode(block.data).decode("ascii")
        return {"type": "image", "media_type": block.media_type, "data": data}
    return {"type": "json", "value": thaw(block.value)}


def _block_from_json(data: Mapping[str, Any]) -> ContentBlock:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(str(data["text"]))
    if kind == "image":
        return ImageBlock(base64.b64decode(data["data"]), str(data["media_type"]))
    if kind == "json":
        return JsonBlock(data.get("value"))
    raise ValueError(f"unknown content block type {kind!r}: expected text, image or json")


def _result_to_json(result: ToolResult) -> dict[str, Any]:
    content: Any = (
        result.content
        if isinstance(result.content, str)
        else [_block_to_json(block) for block in result.content]
    )
    return {
        "content": content,
        "is_error": result.is_error,
        "error_kind": result.error_kind.value if result.error_kind is not None else None,
        "metadata": thaw(result.metadata),
    }


def _result_from_json(data: Mapping[str, Any]) -> ToolResult:
    content = data["content"]
    if not isinstance(content, str):
        content = [_block_from_json(block) for block in content]
    kind = data.get("error_kind")
    return ToolResult(
        content,
        is_error=bool(data.get("is_error")),
        error_kind=ErrorKind(kind) if kind is not None else None,
        metadata=dict(data.get("metadata") or {}),
    )


def _parts_to_json(parts: Sequence[TurnPart]) -> list[dict[str, Any]]:
    out = []
    for part in parts:
        item: dict[str, Any] = {"kind": part.kind, "value": thaw(part.value)}
        if part.extra:
            item["extra"] = thaw(part.extra)
        out.append(item)
    return out


def _parts_from_json(data: Sequence[Mapping[str, Any]]) -> tuple[TurnPart, ...]:
    parts = []
    for item in data:
        kind = item["kind"]
        if kind not in ("text", "call", "opaque"):
            raise ValueError(f"unknown turn part kind {kind!r}: expected text, call or opaque")
        parts.append(TurnPart(kind, item["value"], dict(item.get("extra") or {})))
    return tuple(parts)


def message_to_json(message: Message) -> dict[str, Any]:
    """A message as plain JSON data (`message_from_json` reads it back equal)."""
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "text": message.text}
    if isinstance(message, ToolResultsMessage):
        return {
            "role": "tool",
            "results": [
                {"call": _call_to_json(r.call), "result": _result_to_json(r.result)}
                for r in message.results
            ],
        }
    return {
        "role": "assistant",
        "text": message.text,
        "calls": [_call_to_json(call) for call in message.calls],
        "parts": _parts_to_json(message.parts) if message.parts is not None else None,
        "reasoning": message.reasoning,
        "format": message.format,
        "model": message.model,
        "finish_reason": message.finish_reason,
        "truncated": message.truncated,
    }


def message_from_json(data: Mapping[str, Any]) -> Message:
    """A message from `message_to_json`'s data; a clear ValueError for anything else."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored message must be a JSON object, got {type(data).__name__}")
    role = data.get("role")
    try:
        if role == "system":
            return SystemMessage(str(data["text"]))
        if role == "user":
            return UserMessage(str(data["text"]))
        if role == "tool":
            return ToolResultsMessage(
                tuple(
                    ToolReturn(_call_from_json(r["call"]), _result_from_json(r["result"]))
                    for r in data["results"]
                )
            )
        if role == "assistant":
            parts = data.get("parts")
            return AssistantMessage(
                text=str(data.get("text") or ""),
                calls=tuple(_call_from_json(call) for call in data.get("calls") or ()),
                parts=_parts_from_json(parts) if parts is not None else None,
                reasoning=str(data.get("reasoning") or ""),
                format=data.get("format"),
                model=data.get("model"),
                finish_reason=data.get("finish_reason"),
                truncated=_flag(data.get("truncated"), "truncated"),
            )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"stored {role} message is incomplete or malformed: {exc!r}") from None
    raise ValueError(f"unknown message role {role!r}: expected system, user, assistant or tool")


def _flag(value: Any, name: str) -> bool:
    """A stored true/false (absent is false); ``"false"`` is not read as true."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise ValueError(f"stored field {name!r} must be true or false, got {value!r}")
