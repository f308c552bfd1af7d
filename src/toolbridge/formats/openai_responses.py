"""OpenAI Responses: flat ``function`` tools out, ``function_call`` items in,
``function_call_output`` items back.

Two ids travel with a call: ``call_id`` links the output to the call and becomes
`ToolCallRequest.id`; the item's own ``id`` (``fc_...``) is kept in
``extra["item_id"]`` for replaying the item as it was. The API treats a missing
``strict`` as true, so every definition states it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolbridge.calls import ToolCallRequest
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.openai_chat import adapt_parameters, restore_strict_arguments
from toolbridge.formats.types import (
    FormatError,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    ToolSpec,
    as_payload,
    data_url,
    result_parts,
    tool_specs,
)
from toolbridge.schema import EMPTY_OBJECT_SCHEMA
from toolbridge.tool import ImageBlock

__all__ = ["definitions", "parse_definitions", "parse_response", "result_messages"]

TRUNCATION_REASONS = frozenset({"max_output_tokens"})
_CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
# Item fields echoed back verbatim when the call is replayed.
_KEPT_FIELDS = ("namespace", "caller")


def definitions(tools: ToolSource, *, strict: bool | None = False) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{"type": "function", "name", "parameters", "strict"}``."""
    out = []
    for spec in tool_specs(tools):
        parameters, is_strict = adapt_parameters(spec, strict)
        out.append(
            {
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": parameters,
                "strict": is_strict,
            }
        )
    return out


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back into `ToolSpec`s (the parameters as sent)."""
    specs = []
    for index, item in enumerate(tools):
        name = item.get("name")
        if item.get("type") != "function" or not isinstance(name, str):
            raise FormatError(f'tools[{index}] is not a named {{"type": "function"}} tool')
        parameters = item.get("parameters") or EMPTY_OBJECT_SCHEMA
        specs.append(ToolSpec(name, item.get("description") or "", parameters))
    return specs


def parse_response(
    payload: Any,
    *,
    tools: ToolSource | None = None,
    strict: bool | None = False,
    id_salt: str = "",
) -> ParsedResponse:
    """A Responses API response -> text and calls (``call_id`` as the call's id)."""
    data = as_payload(payload, "OpenAI Responses")
    output = data.get("output")
    if not isinstance(output, list):
        raise FormatError('an OpenAI Responses response needs an "output" list')
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    cut_call = False
    for index, item in enumerate(output):
        if not isinstance(item, dict):
            raise FormatError(f"output[{index}] is not an object")
        kind = item.get("type")
        if kind == "message":
            texts.extend(
                part.get("text", "")
                for part in item.get("content") or []
                if isinstance(part, dict) and part.get("type") == "output_text"
            )
        elif kind in _CALL_TYPES:
            calls.append(_call(item, len(calls), id_salt))
            cut_call = cut_call or item.get("status") == "incomplete"
    parsed_calls = tuple(calls)
    if tools is not None:
        parsed_calls = restore_strict_arguments(parsed_calls, tools, strict=strict)
    details = data.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return ParsedResponse(
        text="".join(texts),
        calls=parsed_calls,
        finish_reason=reason or data.get("status"),
        truncated=reason in TRUNCATION_REASONS or cut_call,
        raw=data,
    )


def _call(item: Mapping[str, Any], position: int, salt: str) -> ToolCallRequest:
    kind = str(item["type"])
    name = item.get("name", "")
    arguments = item.get(_CALL_TYPES[kind])
    extra: dict[str, Any] = {k: item[k] for k in _KEPT_FIELDS if item.get(k) is not None}
    if isinstance(item.get("id"), str):
        extra["item_id"] = item["id"]
    if kind == "custom_tool_call":
        extra["type"] = "custom"
    return tool_call(item.get("call_id"), name, arguments, position, extra, salt=salt)


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One ``function_call_output`` item per outcome; images as ``input_image`` parts."""
    items = []
    for outcome in outcomes:
        parts = result_parts(outcome.result)
        output: str | list[dict[str, Any]]
        if any(isinstance(p, ImageBlock) for p in parts):
            output = [
                {"type": "input_image", "image_url": data_url(p)}
                if isinstance(p, ImageBlock)
                else {"type": "input_text", "text": p.text}
                for p in parts
            ]
        else:
            output = outcome.result.text
        custom = outcome.call.extra.get("type") == "custom"
        kind = "custom_tool_call_output" if custom else "function_call_output"
        items.append({"type": kind, "call_id": outcome.call.id, "output": output})
    return items
