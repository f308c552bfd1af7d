"""Data shared by the provider format modules: what a parse returns, what results are
made from, what a history repair reports, and how a call without an id gets one.

Every provider module (`openai_chat`, `openai_responses`, `anthropic`, `gemini`,
`ollama`, `bedrock`) speaks in these types, so code that handles one provider's
output handles them all. Calls without an id get `call_ids.generated_call_id`, the
same id the streaming assembler gives them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolbridge.calls import ToolCallRequest
from toolbridge.errors import ToolbridgeError
from toolbridge.jsontext import to_json_text
from toolbridge.registry import ToolRegistry
from toolbridge.results import EMPTY_RESULT
from toolbridge.tool import ImageBlock, TextBlock, Tool, ToolResult

__all__ = [
    "FormatError",
    "FormatName",
    "HistoryChange",
    "ParsedResponse",
    "ToolOutcomeLike",
    "ToolSource",
    "ToolSpec",
    "as_payload",
    "data_url",
    "result_parts",
    "tool_specs",
]

FormatName = Literal["openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock"]


class FormatError(ToolbridgeError, ValueError):
    """A payload is not in the shape the provider documents; the message says what is off."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A provider-neutral tool definition: what `definitions` renders and reads back."""

    name: str
    description: str
    parameters: Mapping[str, Any]


ToolSource = ToolRegistry | Iterable[Tool | ToolSpec]


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """A provider response taken apart: the assistant text and the tool calls in order.

    `truncated` is True when the provider says the output was cut off (``length``,
    ``max_tokens``, ...): the calls may then be incomplete, and the registry will
    report their arguments as cut off rather than run a guess.
    """

    text: str
    calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None
    truncated: bool
    raw: Any


def data_url(block: ImageBlock) -> str:
    """The image as a ``data:`` URL, the form OpenAI's APIs take inline images in."""
    return f"data:{block.media_type};base64,{block.base64}"


class ToolOutcomeLike(Protocol):
    """What result rendering needs from an executed call: the request and its result."""

    @property
    def call(self) -> ToolCallRequest: ...

    @property
    def result(self) -> ToolResult: ...


HistoryAction = Literal[
    "added_missing_result",
    "dropped_orphan_result",
    "dropped_duplicate_result",
    "moved_result",
    "removed_nameless_call",
    "repaired_arguments",
    "filled_empty_arguments",
    "added_call_id",
    "dropped_empty_message",
]


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """One change `repair_history` made; `index` is the message's position in the input."""

    action: HistoryAction
    index: int
    call_id: str | None
    detail: str


def tool_specs(tools: ToolSource) -> list[ToolSpec]:
    """The tools as `ToolSpec`s: a registry in its stable definition order, else as given."""
    specs: list[ToolSpec] = []
    for item in tools:
        if isinstance(item, ToolSpec):
            specs.append(item)
        elif isinstance(item, Tool):
            specs.append(ToolSpec(item.name, item.description, item.parameters))
        else:
            raise TypeError(
                f"expected a ToolRegistry or Tool/ToolSpec objects, got {type(item).__name__}"
            )
    return specs


def as_payload(payload: Any, provider: str) -> dict[str, Any]:
    """A response as a plain dict: JSON text, a dict, or an SDK model (dumped by alias)."""
    if isinstance(payload, str | bytes | bytearray):
        try:
            payload = json.loads(payload)
        except ValueError as exc:
            raise FormatError(f"the {provider} response is not valid JSON: {exc}") from None
    elif not isinstance(payload, Mapping):
        dump = getattr(payload, "model_dump", None)
        if callable(dump):
            payload = dump(mode="json", by_alias=True, exclude_none=True)
    if not isinstance(payload, Mapping):
        raise FormatError(
            f"a {provider} response must be a JSON object, got {type(payload).__name__}"
        )
    return dict(payload)


def result_parts(result: ToolResult) -> list[TextBlock | ImageBlock]:
    """The result as text and image parts; JSON blocks become JSON text, text runs merge.

    Merging keeps the common case (text only) a single part, which every provider
    accepts, while images stay separate blocks for the providers that take them.
    """
    if isinstance(result.content, str):
        return [TextBlock(result.content)]
    parts: list[TextBlock | ImageBlock] = []
    for block in result.content:
        if isinstance(block, ImageBlock):
            parts.append(block)
            continue
        text = block.text if isinstance(block, TextBlock) else to_json_text(block.value)
        if parts and isinstance(parts[-1], TextBlock):
            parts[-1] = TextBlock(parts[-1].text + "\n" + text)
        else:
            parts.append(TextBlock(text))
    return parts or [TextBlock(EMPTY_RESULT)]
