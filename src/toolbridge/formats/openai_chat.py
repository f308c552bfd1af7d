"""OpenAI Chat Completions: ``tools`` out, ``message.tool_calls`` in, ``role: tool`` back.

Definitions are sent as they are (``strict: false``) unless you ask: ``strict=None``
uses strict mode where the schema allows it exactly (see `toolbridge.formats.schemas`),
``strict=True`` demands it. Strict mode makes optional keys required and nullable,
so a model then sends ``null`` for what it leaves out: pass the same `tools` and
`strict` to `parse_response` and it undoes that mapping on the calls it parses.

Tool messages carry text only in this API, so images a tool returned follow the
tool messages as one user message of image parts, each introduced by its call id.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolbridge.calls import ArgumentsDecodeError, ToolCallRequest, decode_arguments
from toolbridge.errors import ToolDefinitionError
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.schemas import UnsupportedSchema, drop_strict_nulls, openai_strict
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
from toolbridge.schema import EMPTY_OBJECT_SCHEMA, thaw
from toolbridge.tool import ImageBlock

__all__ = [
    "adapt_parameters",
    "definitions",
    "parse_definitions",
    "parse_response",
    "restore_strict_arguments",
    "result_messages",
]

logger = logging.getLogger(__name__)

TRUNCATION_REASONS = frozenset({"length"})


def adapt_parameters(spec: ToolSpec, strict: bool | None) -> tuple[dict[str, Any], bool]:
    """The parameters to send and whether they are strict.

    ``strict=None`` makes a tool strict when its schema can be made strict exactly;
    ``True`` requires it (a `ToolDefinitionError` says why not); ``False`` never does.
    """
    if strict is False:
        return thaw(spec.parameters), False
    try:
        return openai_strict(spec.parameters), True
    except UnsupportedSchema as exc:
        if strict:
            raise ToolDefinitionError(
                f"tool {spec.name!r} cannot use strict mode: {exc}; pass strict=None to "
                "send it with strict: false, or simplify its schema"
            ) from None
        logger.debug("tool %r sent with strict: false: %s", spec.name, exc)
        return thaw(spec.parameters), False


def definitions(tools: ToolSource, *, strict: bool | None = False) -> list[dict[str, Any]]:
    """The ``tools`` array: one ``{"type": "function", "function": ...}`` per tool."""
    out = []
    for spec in tool_specs(tools):
        parameters, is_strict = adapt_parameters(spec, strict)
        function = {
            "name": spec.name,
            "description": spec.description,
            "parameters": parameters,
            "strict": is_strict,
        }
        out.append({"type": "function", "function": function})
    return out


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back into `ToolSpec`s (the parameters as sent)."""
    specs = []
    for index, item in enumerate(tools):
        function = item.get("function")
        if item.get("type") != "function" or not isinstance(function, Mapping):
            raise FormatError(f'tools[{index}] is not a {{"type": "function"}} tool')
        specs.append(_spec(function, index))
    return specs


def _spec(function: Mapping[str, Any], index: int) -> ToolSpec:
    name = function.get("name")
    if not isinstance(name, str):
        raise FormatError(f"tools[{index}] has no name")
    parameters = function.get("parameters") or EMPTY_OBJECT_SCHEMA
    return ToolSpec(name, function.get("description") or "", parameters)


def parse_response(
    payload: Any,
    *,
    tools: ToolSource | None = None,
    strict: bool | None = False,
    choice: int = 0,
    id_salt: str = "",
) -> ParsedResponse:
    """A chat completion (JSON text, dict or SDK object) -> text and tool calls.

    Arguments stay the model's raw text, except that with `tools` given the nulls
    strict mode forced into optional keys are dropped (see `restore_strict_arguments`).
    """
    data = as_payload(payload, "OpenAI chat")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise FormatError('an OpenAI chat completion needs a non-empty "choices" list')
    if not all(isinstance(c, dict) for c in choices):
        raise FormatError('every entry of "choices" must be an object')
    picked = next((c for c in choices if c.get("index") == choice), None)
    if picked is None:
        if choice >= len(choices):
            raise FormatError(f"the response has no choice {choice}")
        picked = choices[choice]
    message = picked.get("message")
    if not isinstance(message, dict):
        raise FormatError(f'choice {choice} has no "message" object')
    calls = parse_message_calls(message, id_salt=id_salt)
    if tools is not None:
        calls = restore_strict_arguments(calls, tools, strict=strict)
    finish = picked.get("finish_reason")
    return ParsedResponse(
        text=message_text(message.get("content")),
        calls=calls,
        finish_reason=finish,
        truncated=finish in TRUNCATION_REASONS,
        raw=data,
    )


def message_text(content: Any) -> str:
    """Assistant text from ``content``: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def parse_message_calls(
    message: Mapping[str, Any], *, id_salt: str = ""
) -> tuple[ToolCallRequest, ...]:
    """The calls of one assistant message, including the legacy ``function_call``."""
    calls = []
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise FormatError('"tool_calls" must be a list')
    for position, raw in enumerate(raw_calls):
        body = raw.get("function") if type(raw) is dict else None
        call_id = raw.get("id") if body is not None else None
        if type(body) is dict and type(call_id) is str and call_id:  # the common case, fast
            calls.append(ToolCallRequest(call_id, body.get("name", ""), body.get("arguments")))
            continue
        if not isinstance(raw, dict):
            raise FormatError(f"tool_calls[{position}] is not an object")
        kind = raw.get("type", "function")
        body = raw.get("custom") if kind == "custom" else raw.get("function")
        if not isinstance(body, dict):
            raise FormatError(f'tool_calls[{position}] has no "{kind}" object')
        name = body.get("name", "")
        arguments = body.get("input") if kind == "custom" else body.get("arguments")
        extra: dict[str, Any] = {"type": "custom"} if kind == "custom" else {}
        calls.append(tool_call(raw.get("id"), name, arguments, position, extra, salt=id_salt))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        name, arguments = legacy.get("name", ""), legacy.get("arguments")
        extra = {"legacy_function_call": True}
        calls.append(tool_call(None, name, arguments, len(calls), extra, salt=id_salt))
    return tuple(calls)


def restore_strict_arguments(
    calls: Sequence[ToolCallRequest], tools: ToolSource, *, strict: bool | None = False
) -> tuple[ToolCallRequest, ...]:
    """Undo strict mode on calls to tools that were sent strict (same `strict` as sent).

    Only argument text that decodes strictly to an object is touched, and only when a
    forced ``null`` is dropped; anything else stays raw for the registry to judge.
    """
    if strict is False:
        return tuple(calls)
    specs = {spec.name: spec for spec in tool_specs(tools)}
    restored = []
    for call in calls:
        spec = specs.get(call.name) if isinstance(call.name, str) else None
        new_arguments = _restored(call.arguments, spec) if spec is not None else None
        restored.append(call if new_arguments is None else _with(call, new_arguments))
    return tuple(restored)


def _restored(arguments: Any, spec: ToolSpec) -> dict[str, Any] | None:
    if isinstance(arguments, str):
        try:
            arguments = decode_arguments(arguments)
        except ArgumentsDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    try:
        openai_strict(spec.parameters)
    except UnsupportedSchema:
        return None  # the tool was sent with strict: false
    result = drop_strict_nulls(arguments, spec.parameters)
    return result if result != arguments else None


def _with(call: ToolCallRequest, arguments: dict[str, Any]) -> ToolCallRequest:
    return dataclasses.replace(call, arguments=arguments)


def result_messages(outcomes: Iterable[ToolOutcomeLike]) -> list[dict[str, Any]]:
    """One ``role: tool`` message per outcome, in order; images in a user message after."""
    messages: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    image_count = 0
    for outcome in outcomes:
        call_id = outcome.call.id
        texts = []
        for part in result_parts(outcome.result):
            if isinstance(part, ImageBlock):
                image_count += 1
                texts.append(f"[image {image_count}: shown in the next message]")
                images.append({"type": "text", "text": f"Image from tool call {call_id}:"})
                images.append({"type": "image_url", "image_url": {"url": data_url(part)}})
            else:
                texts.append(part.text)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "\n".join(texts)})
    if images:
        messages.append({"role": "user", "content": images})
    return messages
