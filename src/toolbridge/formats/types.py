"""Data shared by the provider format modules: what a parse returns, what results are
made from, what a history repair reports, and how a call without an id gets one.

Every provider module (`openai_chat`, `openai_responses`, `anthropic`, `gemini`,
`ollama`, `bedrock`) speaks in these types, so code that handles one provider's
output handles them all. Calls without an id get `call_ids.generated_call_id`, the
same id the streaming assembler gives them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from toolbridge.core.calls import ArgumentsDecodeError, ToolCallRequest, decode_arguments
from toolbridge.core.errors import ToolbridgeError
from toolbridge.core.frozen import thaw
from toolbridge.core.jsontext import to_json_text
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.results import EMPTY_RESULT
from toolbridge.core.sendable import check_sendable_name, sendable, sendable_definition
from toolbridge.core.tool import ImageBlock, TextBlock, Tool, ToolResult

__all__ = [
    "CALL_EXTRA_KEYS",
    "NO_PARAMETERS",
    "FormatError",
    "FormatName",
    "HistoryChange",
    "ParsedResponse",
    "ToolOutcomeLike",
    "ToolSource",
    "ToolSpec",
    "TurnPart",
    "argument_object",
    "data_url",
    "result_parts",
    "tool_specs",
    "turn_parts",
]

CALL_EXTRA_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "generated_id": "True when the provider sent no id and toolbridge made one up; "
        "renderers never send such an id back as the provider's own",
        "thought_signature": "Gemini: the part's signature (wire: thoughtSignature, "
        "thought_signature in the google-genai SDK's dicts)",
        "extra_content": "OpenAI chat: the tool call's extra_content as on the wire "
        "(Gemini's OpenAI-compatible endpoint: extra_content.google.thought_signature)",
        "item_id": "OpenAI Responses: the function_call item's own id (fc_...; wire: id)",
        "type": '"custom" for OpenAI custom tools (wire: custom / custom_tool_call)',
        "namespace": "OpenAI Responses: as on the wire",
        "caller": "OpenAI Responses: as on the wire",
        "legacy_function_call": "OpenAI chat: the call came as the legacy function_call",
    }
)
"""The one place provider data kept on `ToolCallRequest.extra` is named: key -> what it
is and how it is spelled on the wire. Renderers send these back with their call."""

FormatName = Literal["openai_chat", "openai_responses", "anthropic", "gemini", "ollama", "bedrock"]


class FormatError(ToolbridgeError, ValueError):
    """A payload is not in the shape the provider documents; the message says what is off."""


NO_PARAMETERS: Mapping[str, Any] = MappingProxyType({})
"""`ToolSpec.parameters` of a tool that takes no arguments and says so: providers that
allow it get no parameters key at all (Gemini refuses an empty OBJECT schema)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A provider-neutral tool definition: what `definitions` renders and reads back.

    ``parameters`` empty (`NO_PARAMETERS`) means "no parameters": the tool is sent
    without a parameters key where the provider allows it, and read back the same way.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: NO_PARAMETERS)

    @property
    def has_parameters(self) -> bool:
        return bool(self.parameters)


@dataclass(frozen=True, slots=True)
class TurnPart:
    """One piece of an assistant turn, in the order the provider sent it.

    ``kind`` says what `value` is: ``"text"`` a text segment, ``"call"`` the index of
    the call in `ParsedResponse.calls`, ``"opaque"`` a provider item that must be sent
    back exactly as received (a thinking block, a reasoning item, a thought part).
    `extra` holds wire keys of a text part to replay with it (Gemini's
    ``thoughtSignature`` on a text part).
    """

    kind: Literal["text", "call", "opaque"]
    value: Any
    extra: Mapping[str, Any] = field(default_factory=lambda: NO_PARAMETERS)


ToolSource = ToolRegistry | Iterable[Tool | ToolSpec]


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """A provider response taken apart: the assistant text and the tool calls in order.

    `parts` keeps the whole turn in order, with the provider-opaque items (thinking
    blocks, reasoning items, thought signatures) the provider needs back next turn.
    `truncated` is True when the provider says the output was cut off (``length``,
    ``max_tokens``, ...): the calls may then be incomplete, and the registry will
    report their arguments as cut off rather than run a guess.
    """

    text: str
    calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None
    truncated: bool
    raw: Any
    parts: tuple[TurnPart, ...] | None = None
    """The turn in order, opaque provider items included: what `assistant_messages`
    renders. None for a response made by hand: the text, then the calls."""


def turn_parts(parsed: ParsedResponse) -> tuple[TurnPart, ...]:
    """The parts to render: the parsed ones, or for a response made by hand (parts None)
    the text, then the calls."""
    if parsed.parts is not None:
        return parsed.parts
    text = (TurnPart("text", parsed.text),) if parsed.text else ()
    return text + tuple(TurnPart("call", index) for index in range(len(parsed.calls)))


def argument_object(call: ToolCallRequest) -> Any:
    """A call's arguments as the object Anthropic, Gemini, Bedrock and Ollama replay:
    decoded when they are object text, ``{}`` when missing, else as they are."""
    arguments = call.arguments
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            decoded = decode_arguments(arguments)
        except ArgumentsDecodeError:
            return arguments
        return decoded if isinstance(decoded, dict) else arguments
    return thaw(arguments)


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
    """The tools as `ToolSpec`s: a registry in its stable definition order, else as given.

    As they can be sent: each lone surrogate in a description or a schema written as the
    six characters ``\\udc80`` (a tool's, once per tool: `sendable_definition`); a name
    holding one is a `ToolDefinitionError` naming it (a model could not call it back).
    """
    specs: list[ToolSpec] = []
    for item in tools:
        if isinstance(item, ToolSpec):
            check_sendable_name(item.name)
            specs.append(sendable(item))
        elif isinstance(item, Tool):
            definition = sendable_definition(item)
            specs.append(ToolSpec(definition.name, definition.description, definition.parameters))
        else:
            raise TypeError(
                f"expected a ToolRegistry or Tool/ToolSpec objects, got {type(item).__name__}"
            )
    return specs


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
