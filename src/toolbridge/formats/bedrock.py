"""AWS Bedrock Converse: ``toolSpec`` tools out, ``toolUse`` blocks in, ``toolResult``
blocks with a ``status`` back.

Shapes follow the Converse API reference. Definitions go inside
``toolConfig={"tools": definitions(...)}`` with the schema unchanged under
``inputSchema.json``. Image bytes are raw ``bytes`` by default, as boto3 wants
them; pass ``base64_images=True`` for the JSON wire form of the HTTP API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.frozen import thaw
from toolbridge.core.schema import EMPTY_OBJECT_SCHEMA
from toolbridge.core.tool import ImageBlock, JsonBlock
from toolbridge.formats.assembler import StreamAdapter
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.repair import MISSING_RESULT, HistoryShape, Messages, repair
from toolbridge.formats.types import (
    FormatError,
    HistoryChange,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    ToolSpec,
    TurnPart,
    argument_object,
    result_parts,
    tool_specs,
    turn_parts,
)
from toolbridge.formats.wire import (
    as_payload,
    definition_items,
    opt_id,
    opt_index,
    opt_list,
    opt_obj,
    opt_str,
    req_obj,
)

__all__ = [
    "HISTORY",
    "BedrockStream",
    "assistant_messages",
    "definitions",
    "parse_definitions",
    "parse_response",
    "repair_history",
    "result_blocks",
    "result_messages",
]

TRUNCATION_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif"}
_IMAGE_FORMATS["image/webp"] = "webp"


def definitions(tools: ToolSource) -> list[dict[str, Any]]:
    """The ``toolConfig.tools`` list: ``{"toolSpec": {name, description, inputSchema}}``
    (a tool with no parameters gets the empty object schema)."""
    return [
        {
            "toolSpec": {
                "name": s.name,
                "description": s.description,
                "inputSchema": {"json": thaw(s.parameters or EMPTY_OBJECT_SCHEMA)},
            }
        }
        for s in tool_specs(tools)
    ]


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``toolConfig.tools`` list back into `ToolSpec`s. Raises only `FormatError`."""
    specs = []
    for index, item in enumerate(definition_items(tools)):
        where = f"tools[{index}]"
        spec = opt_obj(item, "toolSpec", where)
        at = f"{where}.toolSpec"
        input_schema = opt_obj(spec, "inputSchema", at) if spec is not None else None
        schema = opt_obj(input_schema, "json", f"{at}.inputSchema") if input_schema else None
        name = opt_str(spec, "name", at) if spec is not None else None
        if spec is None or schema is None or not name:
            raise FormatError(f'{where} needs a "toolSpec" with a "name" and "inputSchema.json"')
        specs.append(ToolSpec(name, opt_str(spec, "description", at) or "", schema))
    return specs


def parse_response(payload: Any, *, id_salt: str = "") -> ParsedResponse:
    """A ``Converse`` response -> text and ``toolUse`` calls (``input`` as sent).

    Reasoning blocks (``reasoningContent``, signed) and any other block that is neither
    text nor a call are kept in `ParsedResponse.parts` to be sent back unchanged.
    Raises only `FormatError` for a payload of the wrong shape.
    """
    data = as_payload(payload, "Bedrock Converse")
    output = opt_obj(data, "output", "response")
    message = opt_obj(output, "message", "output") if output is not None else None
    content = opt_list(message, "content", "output.message") if message is not None else None
    if content is None:
        raise FormatError('a Converse response needs "output.message.content" as a list')
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    parts: list[TurnPart] = []
    for index, block in enumerate(content):
        where = f"output.message.content[{index}]"
        req_obj(block, where)
        text = opt_str(block, "text", where)
        use = opt_obj(block, "toolUse", where)
        if text is not None:
            texts.append(text)
            parts.append(TurnPart("text", text))
        elif use is not None:
            at = f"{where}.toolUse"
            call_id, name = opt_id(use, "toolUseId", at), opt_str(use, "name", at) or ""
            parts.append(TurnPart("call", len(calls)))
            calls.append(tool_call(call_id, name, use.get("input"), len(calls), salt=id_salt))
        else:
            parts.append(TurnPart("opaque", block))
    stop = opt_str(data, "stopReason", "response")
    return ParsedResponse(
        text="".join(texts),
        calls=tuple(calls),
        finish_reason=stop,
        truncated=stop in TRUNCATION_REASONS,
        raw=data,
        parts=tuple(parts),
    )


def assistant_messages(parsed: ParsedResponse) -> list[dict[str, Any]]:
    """The turn as one ``role: assistant`` message: reasoning blocks as received, text
    and ``toolUse`` blocks, in the order they came."""
    blocks: list[dict[str, Any]] = []
    for part in turn_parts(parsed):
        if part.kind == "opaque":
            blocks.append(thaw(part.value))
        elif part.kind == "text":
            blocks.append({"text": part.value})
        else:
            call = parsed.calls[part.value]
            use = {"toolUseId": call.id, "name": call.name, "input": argument_object(call)}
            blocks.append({"toolUse": use})
    return [{"role": "assistant", "content": blocks}]


def result_messages(
    outcomes: Iterable[ToolOutcomeLike], *, base64_images: bool = False
) -> list[dict[str, Any]]:
    """One user message of ``toolResult`` blocks, ``status`` success or error (none: empty)."""
    blocks = result_blocks(outcomes, base64_images=base64_images)
    return [{"role": "user", "content": blocks}] if blocks else []


def result_blocks(
    outcomes: Iterable[ToolOutcomeLike], *, base64_images: bool = False
) -> list[dict[str, Any]]:
    """The ``toolResult`` blocks, in call order, for callers building their own message."""
    return [
        {
            "toolResult": {
                "toolUseId": o.call.id,
                "content": _content(o, base64_images),
                "status": "error" if o.result.is_error else "success",
            }
        }
        for o in outcomes
    ]


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


class BedrockStream(StreamAdapter):
    """Bedrock ConverseStream events: ``contentBlockStart.start.toolUse``,
    ``contentBlockDelta.delta.toolUse.input`` fragments, ``contentBlockStop``.

    Reasoning deltas (``reasoningContent`` text, signature, redacted bytes) are rebuilt
    into the ``reasoningContent`` block the whole response would have held.
    """

    TRUNCATION_REASONS = TRUNCATION_REASONS

    def __init__(self, *, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._reasoning: dict[int | None, tuple[dict[str, Any], list[str]]] = {}

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        start = opt_obj(data, "contentBlockStart", "event")
        delta_event = opt_obj(data, "contentBlockDelta", "event")
        stop = opt_obj(data, "contentBlockStop", "event")
        message_stop = opt_obj(data, "messageStop", "event")
        if start is not None:
            where = "event.contentBlockStart"
            index = opt_index(start, "contentBlockIndex", where)
            body = opt_obj(start, "start", where) or {}
            tool_use = opt_obj(body, "toolUse", f"{where}.start")
            if tool_use is not None:
                at = f"{where}.start.toolUse"
                return self.open(
                    index,
                    call_id=opt_id(tool_use, "toolUseId", at),
                    name=opt_str(tool_use, "name", at) or "",
                )
        elif delta_event is not None:
            where = "event.contentBlockDelta"
            index = opt_index(delta_event, "contentBlockIndex", where)
            delta = opt_obj(delta_event, "delta", where) or {}
            text = opt_str(delta, "text", f"{where}.delta")
            tool_use = opt_obj(delta, "toolUse", f"{where}.delta")
            reasoning = opt_obj(delta, "reasoningContent", f"{where}.delta")
            if text:
                self.add_text(text)
            elif tool_use is not None and self.is_open(index):
                fragment = opt_str(tool_use, "input", f"{where}.delta.toolUse")
                self.add_arguments(index, fragment or "")
            elif reasoning is not None:
                self._reason(reasoning, index, f"{where}.delta.reasoningContent")
        elif stop is not None:
            index = opt_index(stop, "contentBlockIndex", "event.contentBlockStop")
            self._end_reasoning(index)
            if self.is_open(index):
                return [self.finish(index)]
        elif message_stop is not None:
            self.finish_reason = opt_str(message_stop, "stopReason", "event.messageStop")
            return self.finish_all()
        return []

    def _reason(self, delta: Mapping[str, Any], index: int | None, where: str) -> None:
        if index not in self._reasoning:
            block: dict[str, Any] = {}
            self.add_opaque({"reasoningContent": block})
            self._reasoning[index] = (block, [])
        block, texts = self._reasoning[index]
        text = opt_str(delta, "text", where)
        signature = opt_str(delta, "signature", where)
        if text is not None:
            texts.append(text)
        if signature is not None:
            block.setdefault("reasoningText", {})["signature"] = signature
        if "redactedContent" in delta:
            block["redactedContent"] = delta["redactedContent"]

    def _end_reasoning(self, index: int | None) -> None:
        if index in self._reasoning:
            block, texts = self._reasoning.pop(index)
            if texts:
                block.setdefault("reasoningText", {})["text"] = "".join(texts)

    def close(self) -> list[ToolCallRequest]:
        for index in list(self._reasoning):
            self._end_reasoning(index)
        return super().close()


# --- history -------------------------------------------------------------------------


def _bedrock_result(call_id: str, name: str) -> dict[str, Any]:
    content = [{"text": MISSING_RESULT}]
    return {"toolResult": {"toolUseId": call_id, "content": content, "status": "error"}}


HISTORY = HistoryShape(
    _bedrock_result, "toolUse", "toolResult", "toolUseId", "toolUseId", arguments="input"
)
"""Where this format keeps calls and results in a stored history: ``toolUse`` blocks in
assistant messages, ``toolResult`` blocks in the user message after them."""


def repair_history(messages: Sequence[Mapping[str, Any]]) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of a stored history in this format, and what was changed (see
    `toolbridge.formats.repair`). Raises only `FormatError`."""
    return repair(messages, HISTORY)
