"""Anthropic Messages: ``input_schema`` tools out, ``tool_use`` blocks in, ``tool_result``
blocks back.

Anthropic takes full JSON Schema, so definitions send the tool's schema unchanged.
All results of one assistant turn go back in one user message, one ``tool_result``
block per call with ``is_error`` set, text and images as content blocks.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.frozen import thaw
from toolbridge.core.schema import EMPTY_OBJECT_SCHEMA
from toolbridge.core.tool import ImageBlock
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
    "AnthropicStream",
    "assistant_messages",
    "definitions",
    "parse_definitions",
    "parse_response",
    "repair_history",
    "result_blocks",
    "result_messages",
    "tool_search_definitions",
]

TRUNCATION_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})


def definitions(tools: ToolSource) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{"name", "description", "input_schema"}`` per tool (a tool
    with no parameters gets the empty object schema Anthropic requires)."""
    return [
        {
            "name": s.name,
            "description": s.description,
            "input_schema": thaw(s.parameters or EMPTY_OBJECT_SCHEMA),
        }
        for s in tool_specs(tools)
    ]


TOOL_SEARCH_BETA = "advanced-tool-use-2025-11-20"
"""The ``anthropic-beta`` value a request with a tool-search server tool sends."""
TOOL_SEARCH_BETA_CLOUD = "tool-search-tool-2025-10-19"
"""The same on Vertex AI and Amazon Bedrock, which refuse the first-party value."""


def tool_search_definitions(
    definitions: Sequence[Mapping[str, Any]], deferred: Collection[str], search: str = "bm25"
) -> list[dict[str, Any]]:
    """The ``tools`` array for Anthropic's own tool search: the tool-search server tool
    (``search`` is ``"bm25"`` or ``"regex"``) first, then every definition, those named
    in `deferred` with ``"defer_loading": true`` (the model sees them only once its
    search returns a ``tool_reference`` to them)."""
    if search not in ("bm25", "regex"):
        raise ValueError(f"Anthropic's tool search is 'bm25' or 'regex', got {search!r}")
    name = f"tool_search_tool_{search}"
    tools: list[dict[str, Any]] = [{"type": f"{name}_20251119", "name": name}]
    for item in definitions:
        tool = dict(item)
        if tool.get("name") in deferred:
            tool["defer_loading"] = True
        tools.append(tool)
    return tools


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back into `ToolSpec`s. Raises only `FormatError`."""
    specs = []
    for index, item in enumerate(definition_items(tools)):
        where = f"tools[{index}]"
        name, schema = opt_str(item, "name", where), opt_obj(item, "input_schema", where)
        if not name or schema is None:
            raise FormatError(f'{where} needs a "name" and an "input_schema" object')
        specs.append(ToolSpec(name, opt_str(item, "description", where) or "", schema))
    return specs


def parse_response(payload: Any, *, id_salt: str = "") -> ParsedResponse:
    """A Messages API response -> text and ``tool_use`` calls (``input`` as sent).

    Thinking and redacted-thinking blocks (and any block that is neither text nor a
    call) are kept in `ParsedResponse.parts`, signatures included, to be sent back
    unchanged. Raises only `FormatError` for a payload of the wrong shape.
    """
    data = as_payload(payload, "Anthropic")
    content = opt_list(data, "content", "message")
    if content is None:
        raise FormatError('an Anthropic message needs a "content" list of blocks')
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    parts: list[TurnPart] = []
    for index, block in enumerate(content):
        where = f"content[{index}]"
        req_obj(block, where)
        kind = opt_str(block, "type", where)
        if kind == "text":
            text = opt_str(block, "text", where) or ""
            texts.append(text)
            parts.append(TurnPart("text", text, _text_extra(block)))
        elif kind == "tool_use":
            parts.append(TurnPart("call", len(calls)))
            calls.append(_call(block, len(calls), id_salt, where))
        else:
            parts.append(TurnPart("opaque", block))
    stop = opt_str(data, "stop_reason", "message")
    return ParsedResponse(
        text="".join(texts),
        calls=tuple(calls),
        finish_reason=stop,
        truncated=stop in TRUNCATION_REASONS,
        raw=data,
        parts=tuple(parts),
    )


def _text_extra(block: Mapping[str, Any]) -> dict[str, Any]:
    """Keys of a text block replayed with it (citations)."""
    return {"citations": block["citations"]} if block.get("citations") else {}


def _call(block: Mapping[str, Any], position: int, salt: str, where: str) -> ToolCallRequest:
    call_id = opt_id(block, "id", where)
    name = opt_str(block, "name", where) or ""
    return tool_call(call_id, name, block.get("input"), position, salt=salt)


def assistant_messages(parsed: ParsedResponse) -> list[dict[str, Any]]:
    """The turn as one ``role: assistant`` message of content blocks, in the order they
    came: thinking and redacted-thinking blocks exactly as received, text, ``tool_use``."""
    blocks: list[dict[str, Any]] = []
    for part in turn_parts(parsed):
        if part.kind == "opaque":
            blocks.append(thaw(part.value))
        elif part.kind == "text":
            blocks.append({"type": "text", "text": part.value, **thaw(part.extra)})
        else:
            call = parsed.calls[part.value]
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": argument_object(call),
                }
            )
    return [{"role": "assistant", "content": blocks}]


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


class AnthropicStream(StreamAdapter):
    """Anthropic Messages events: a ``tool_use`` block start, ``input_json_delta``
    fragments, and the block stop that finishes the call.

    Thinking blocks are rebuilt from their ``thinking_delta`` and ``signature_delta``
    events, a server tool's call (``server_tool_use``: the provider's tool search, web
    search) from its ``input_json_delta`` pieces, other blocks (redacted thinking,
    ``tool_search_tool_result``) kept as they start, all at their place in the turn, to
    be sent back unchanged.
    """

    TRUNCATION_REASONS = TRUNCATION_REASONS

    def __init__(self, *, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._thinking: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self._server_calls: dict[int, tuple[dict[str, Any], list[str]]] = {}

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        kind = opt_str(data, "type", "event")
        index = opt_index(data, "index", "event")
        if kind == "content_block_start":
            block = opt_obj(data, "content_block", "event") or {}
            return self._start(block, index)
        if kind == "content_block_delta":
            self._delta(opt_obj(data, "delta", "event") or {}, index)
        elif kind == "content_block_stop":
            self._end_thinking(index)
            self._end_server_call(index)
            if self.is_open(index):
                return [self.finish(index)]
        elif kind == "message_delta":
            delta = opt_obj(data, "delta", "event") or {}
            self.finish_reason = opt_str(delta, "stop_reason", "event.delta") or self.finish_reason
        elif kind == "message_stop":
            return self.finish_all()
        return []

    def _start(self, block: Mapping[str, Any], index: int | None) -> list[ToolCallRequest]:
        where = "event.content_block"
        kind = opt_str(block, "type", where)
        if kind == "tool_use":
            return self.open(
                index,
                call_id=opt_id(block, "id", where),
                name=opt_str(block, "name", where) or "",
                arguments=block.get("input") or None,
            )
        if kind == "text":
            self.add_text(opt_str(block, "text", where) or "")
        elif kind is not None:
            item = thaw(block)
            self.add_opaque(item)
            if kind == "thinking" and index is not None:
                self._thinking[index] = (item, [opt_str(block, "thinking", where) or ""])
            elif kind == "server_tool_use" and index is not None:
                self._server_calls[index] = (item, [])
        return []

    def _delta(self, delta: Mapping[str, Any], index: int | None) -> None:
        where = "event.delta"
        kind = opt_str(delta, "type", where)
        if kind == "text_delta":
            self.add_text(opt_str(delta, "text", where) or "")
        elif kind == "input_json_delta" and self.is_open(index):
            self.add_arguments(index, opt_str(delta, "partial_json", where) or "")
        elif kind == "input_json_delta" and index in self._server_calls:
            self._server_calls[index][1].append(opt_str(delta, "partial_json", where) or "")
        elif kind == "thinking_delta" and index in self._thinking:
            self._thinking[index][1].append(opt_str(delta, "thinking", where) or "")
        elif kind == "signature_delta" and index in self._thinking:
            self._thinking[index][0]["signature"] = opt_str(delta, "signature", where) or ""

    def _end_thinking(self, index: int | None) -> None:
        if index in self._thinking:
            item, fragments = self._thinking.pop(index)
            item["thinking"] = "".join(fragments)

    def _end_server_call(self, index: int | None) -> None:
        """The server tool call's whole input, from its streamed pieces (none: as it
        started). Input that is not a JSON object is a `FormatError`: replayed, the
        provider would refuse the whole history."""
        if index not in self._server_calls:
            return
        item, fragments = self._server_calls.pop(index)
        text = "".join(fragments)
        if not text:
            return
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise FormatError(
                f"the input of server tool call {item.get('id')!r} is not JSON: {exc}"
            ) from None
        if not isinstance(value, dict):
            raise FormatError(
                f"the input of server tool call {item.get('id')!r} is not a JSON object"
            )
        item["input"] = value

    def close(self) -> list[ToolCallRequest]:
        for index in list(self._thinking):
            self._end_thinking(index)
        for index in list(self._server_calls):
            self._end_server_call(index)
        return super().close()


# --- history -------------------------------------------------------------------------


def _anthropic_result(call_id: str, name: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": MISSING_RESULT,
        "is_error": True,
    }


HISTORY = HistoryShape(
    _anthropic_result,
    "tool_use",
    "tool_result",
    result_id="tool_use_id",
    arguments="input",
    typed=True,
)
"""Where this format keeps calls and results in a stored history: ``tool_use`` blocks in
assistant messages, ``tool_result`` blocks in the user message after them."""


def repair_history(messages: Sequence[Mapping[str, Any]]) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of a stored history in this format, and what was changed (see
    `toolbridge.formats.repair`). Raises only `FormatError`."""
    return repair(messages, HISTORY)
