"""Ollama native chat API (``/api/chat``): OpenAI-shaped tools out, ``tool_calls`` with
object arguments in, ``role: tool`` messages with ``tool_name`` back.

Ollama passes the schema to the model's chat template as is, so definitions send it
unchanged. Note that the ``ollama`` Python client re-validates tools through its own
model, which keeps only ``type``, ``items``, ``description`` and ``enum`` of each
property; send these definitions over HTTP (or accept that loss) when constraints
matter. Calls usually come without an id and get a generated one; results always name
their call by ``tool_name`` and add ``tool_call_id`` when the call had an id of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.frozen import thaw
from toolbridge.core.schema import EMPTY_OBJECT_SCHEMA
from toolbridge.core.tool import ImageBlock
from toolbridge.formats.assembler import StreamAdapter
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.openai_chat import parse_definitions
from toolbridge.formats.repair import MISSING_RESULT, HistoryShape, Messages, repair
from toolbridge.formats.types import (
    FormatError,
    HistoryChange,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    TurnPart,
    argument_object,
    result_parts,
    tool_specs,
)
from toolbridge.formats.wire import (
    as_payload,
    opt_bool,
    opt_id,
    opt_list,
    opt_obj,
    opt_str,
    req_obj,
)

__all__ = [
    "HISTORY",
    "OllamaStream",
    "assistant_messages",
    "definitions",
    "parse_definitions",
    "parse_response",
    "repair_history",
    "result_messages",
]

TRUNCATION_REASONS = frozenset({"length"})


def definitions(tools: ToolSource) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{"type": "function", "function": ...}`` per tool (a tool
    with no parameters gets the empty object schema)."""
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": thaw(s.parameters or EMPTY_OBJECT_SCHEMA),
            },
        }
        for s in tool_specs(tools)
    ]


def parse_response(payload: Any, *, id_salt: str = "") -> ParsedResponse:
    """A non-streamed ``/api/chat`` response -> text (thinking left out) and calls.

    The message's ``thinking`` is kept in `ParsedResponse.parts` to be sent back with
    the turn. Raises only `FormatError` for a payload of the wrong shape.
    """
    data = as_payload(payload, "Ollama")
    message = opt_obj(data, "message", "response")
    if message is None:
        raise FormatError('an Ollama chat response needs a "message" object')
    calls = []
    for position, raw in enumerate(opt_list(message, "tool_calls", "message") or []):
        where = f"message.tool_calls[{position}]"
        function = opt_obj(req_obj(raw, where), "function", where)
        if function is None:
            raise FormatError(f'{where} has no "function" object')
        name = opt_str(function, "name", f"{where}.function") or ""
        call_id = opt_id(raw, "id", where)
        arguments = function.get("arguments")
        calls.append(tool_call(call_id, name, arguments, position, salt=id_salt))
    done_reason = opt_str(data, "done_reason", "response")
    text = opt_str(message, "content", "message") or ""
    thinking = opt_str(message, "thinking", "message")
    parts = [TurnPart("opaque", {"thinking": thinking})] if thinking else []
    parts += [TurnPart("text", text)] if text else []
    parts += [TurnPart("call", index) for index in range(len(calls))]
    return ParsedResponse(
        text=text,
        calls=tuple(calls),
        finish_reason=done_reason,
        truncated=done_reason in TRUNCATION_REASONS,
        raw=data,
        parts=tuple(parts),
    )


def assistant_messages(parsed: ParsedResponse) -> list[dict[str, Any]]:
    """The turn as one ``role: assistant`` message: ``content``, ``thinking`` when the
    model thought, and ``tool_calls`` with object arguments (ids only when real)."""
    message: dict[str, Any] = {"role": "assistant", "content": parsed.text}
    for part in parsed.parts or ():
        if part.kind == "opaque":
            message.update(thaw(part.value))
    if parsed.calls:
        message["tool_calls"] = [_wire_call(call) for call in parsed.calls]
    return [message]


def _wire_call(call: ToolCallRequest) -> dict[str, Any]:
    wire: dict[str, Any] = {"function": {"name": call.name, "arguments": argument_object(call)}}
    if not call.extra.get("generated_id"):
        wire = {"id": call.id, **wire}
    return wire


# The image types the Ollama server decodes (no GIF): others are named in the text instead.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One ``role: tool`` message per outcome, named by ``tool_name`` and, when the call
    came with an id of its own, linked by ``tool_call_id``; images base64."""
    messages = []
    for outcome in outcomes:
        parts = result_parts(outcome.result)
        texts = [
            p.text
            if not isinstance(p, ImageBlock)
            else f"[an image of type {p.media_type}, which Ollama does not take, was left out]"
            for p in parts
            if not (isinstance(p, ImageBlock) and p.media_type in _IMAGE_TYPES)
        ]
        images = [
            p.base64 for p in parts if isinstance(p, ImageBlock) and p.media_type in _IMAGE_TYPES
        ]
        message: dict[str, Any] = {
            "role": "tool",
            "content": "\n".join(texts) or f"({len(images)} image(s) attached)",
            "tool_name": outcome.call.name,
        }
        if not outcome.call.extra.get("generated_id"):
            message["tool_call_id"] = outcome.call.id
        if images:
            message["images"] = images
        messages.append(message)
    return messages


class OllamaStream(StreamAdapter):
    """Ollama ``/api/chat`` stream lines: whole ``message.tool_calls`` per chunk, ``done``
    with ``done_reason`` at the end. ``thinking`` fragments are kept for the replay."""

    TRUNCATION_REASONS = TRUNCATION_REASONS

    def __init__(self, *, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._thinking: list[str] = []
        self._thinking_item: dict[str, Any] | None = None

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        message = opt_obj(data, "message", "chunk") or {}
        thinking = opt_str(message, "thinking", "chunk.message")
        if thinking:
            if self._thinking_item is None:
                self._thinking_item = {"thinking": ""}
                self.add_opaque(self._thinking_item)
            self._thinking.append(thinking)
        content = opt_str(message, "content", "chunk.message")
        if content:
            self.add_text(content)
        finished = []
        for position, raw in enumerate(opt_list(message, "tool_calls", "chunk.message") or ()):
            where = f"chunk.message.tool_calls[{position}]"
            function = opt_obj(req_obj(raw, where), "function", where) or {}
            finished.append(
                self.add_whole_call(
                    call_id=opt_id(raw, "id", where),
                    name=opt_str(function, "name", f"{where}.function") or "",
                    arguments=function.get("arguments"),
                )
            )
        if opt_bool(data, "done", "chunk"):
            self.finish_reason = opt_str(data, "done_reason", "chunk") or "stop"
            finished.extend(self.finish_all())
        return finished

    def close(self) -> list[ToolCallRequest]:
        if self._thinking_item is not None:
            self._thinking_item["thinking"] = "".join(self._thinking)
        return super().close()


# --- history -------------------------------------------------------------------------


def _ollama_result(call_id: Any, name: str) -> dict[str, Any]:
    return {"role": "tool", "content": MISSING_RESULT, "tool_name": name}


HISTORY = HistoryShape(_ollama_result, result_name="tool_name", ids=False)
"""Where this format keeps calls and results in a stored history: calls in ``tool_calls``
without ids, results as ``role: tool`` messages answering by ``tool_name`` in order."""


def repair_history(messages: Sequence[Mapping[str, Any]]) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of a stored history in this format, and what was changed (see
    `toolbridge.formats.repair`). Raises only `FormatError`."""
    return repair(messages, HISTORY)
