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
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from toolbridge.core.calls import ArgumentsDecodeError, ToolCallRequest, decode_arguments
from toolbridge.core.errors import ToolDefinitionError
from toolbridge.core.frozen import thaw
from toolbridge.core.jsontext import to_json_text
from toolbridge.core.schema import EMPTY_OBJECT_SCHEMA
from toolbridge.core.tool import ImageBlock
from toolbridge.formats.assembler import StreamAdapter
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.repair import MISSING_RESULT, HistoryShape, Messages, repair
from toolbridge.formats.schemas import UnsupportedSchema, drop_strict_nulls, openai_strict
from toolbridge.formats.types import (
    NO_PARAMETERS,
    FormatError,
    HistoryChange,
    ParsedResponse,
    ToolOutcomeLike,
    ToolSource,
    ToolSpec,
    TurnPart,
    data_url,
    result_parts,
    tool_specs,
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
    "OpenAIChatStream",
    "adapt_parameters",
    "argument_text",
    "assistant_messages",
    "definitions",
    "parse_definitions",
    "parse_response",
    "repair_history",
    "restore_strict_arguments",
    "result_messages",
]

logger = logging.getLogger(__name__)

TRUNCATION_REASONS = frozenset({"length"})
REASONING_KEY = "reasoning_content"
"""Where OpenAI-compatible servers (DeepSeek, vLLM, SGLang) put the model's reasoning."""


def adapt_parameters(spec: ToolSpec, strict: bool | None) -> tuple[dict[str, Any], bool]:
    """The parameters to send and whether they are strict (a tool with no parameters
    gets the empty object schema).

    ``strict=None`` makes a tool strict when its schema can be made strict exactly;
    ``True`` requires it (a `ToolDefinitionError` says why not); ``False`` never does.
    """
    parameters = spec.parameters or EMPTY_OBJECT_SCHEMA
    if strict is False:
        return thaw(parameters), False
    try:
        return openai_strict(parameters), True
    except UnsupportedSchema as exc:
        if strict:
            raise ToolDefinitionError(
                f"tool {spec.name!r} cannot use strict mode: {exc}; pass strict=None to "
                "send it with strict: false, or simplify its schema"
            ) from None
        logger.debug("tool %r sent with strict: false: %s", spec.name, exc)
        return thaw(parameters), False


def definitions(tools: ToolSource, *, strict: bool | None = False) -> list[dict[str, Any]]:
    """The ``tools`` array: one ``{"type": "function", "function": ...}`` per tool.

    A `ToolSpec` with no parameters is sent without a ``parameters`` key (OpenAI reads
    that as "takes no arguments"), except under ``strict=True``, which needs a schema.
    """
    out = []
    for spec in tool_specs(tools):
        function: dict[str, Any] = {"name": spec.name, "description": spec.description}
        if spec.has_parameters or strict is True:
            function["parameters"], function["strict"] = adapt_parameters(spec, strict)
        else:
            function["strict"] = False
        out.append({"type": "function", "function": function})
    return out


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back into `ToolSpec`s (the parameters as sent; none sent:
    `NO_PARAMETERS`). Raises only `FormatError`."""
    specs = []
    for index, item in enumerate(definition_items(tools)):
        where = f"tools[{index}]"
        function = opt_obj(item, "function", where)
        if item.get("type") != "function" or function is None:
            raise FormatError(f'{where} is not a {{"type": "function"}} tool')
        specs.append(function_spec(function, f"{where}.function"))
    return specs


def function_spec(function: Mapping[str, Any], where: str) -> ToolSpec:
    """A ``{"name", "description", "parameters"}`` object as a `ToolSpec`."""
    name = opt_str(function, "name", where)
    if not name:
        raise FormatError(f"{where} has no name")
    parameters = opt_obj(function, "parameters", where) or NO_PARAMETERS
    return ToolSpec(name, opt_str(function, "description", where) or "", parameters)


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
    Raises only `FormatError` for a payload of the wrong shape.
    """
    data = as_payload(payload, "OpenAI chat")
    choices = opt_list(data, "choices", "response")
    if not choices:
        raise FormatError('an OpenAI chat completion needs a non-empty "choices" list')
    for index, entry in enumerate(choices):
        req_obj(entry, f"choices[{index}]")
    picked = next((c for c in choices if c.get("index") == choice), None)
    if picked is None:
        if not 0 <= choice < len(choices):
            raise FormatError(f"the response has no choice {choice}")
        picked = choices[choice]
    where = f"choices[{choice}]"
    message = opt_obj(picked, "message", where)
    if message is None:
        raise FormatError(f'{where} has no "message" object')
    calls = parse_message_calls(message, id_salt=id_salt, where=f"{where}.message")
    if tools is not None:
        calls = restore_strict_arguments(calls, tools, strict=strict)
    finish = opt_str(picked, "finish_reason", where)
    text = message_text(message.get("content"), f"{where}.message.content")
    reasoning = opt_str(message, REASONING_KEY, f"{where}.message")
    parts = [TurnPart("opaque", {REASONING_KEY: reasoning})] if reasoning else []
    parts += [TurnPart("text", text)] if text else []
    parts += [TurnPart("call", i) for i in range(len(calls))]
    return ParsedResponse(
        text=text,
        calls=calls,
        finish_reason=finish,
        truncated=finish in TRUNCATION_REASONS,
        raw=data,
        parts=tuple(parts),
    )


def message_text(content: Any, where: str = "content") -> str:
    """Assistant text from ``content``: a string, or the text parts of a list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise FormatError(f"{where} must be a string or an array of parts")
    texts = []
    for index, part in enumerate(content):
        text = opt_str(req_obj(part, f"{where}[{index}]"), "text", f"{where}[{index}]")
        texts.append(text or "")
    return "".join(texts)


def parse_message_calls(
    message: Mapping[str, Any], *, id_salt: str = "", where: str = "message"
) -> tuple[ToolCallRequest, ...]:
    """The calls of one assistant message, including the legacy ``function_call``.

    A call's ``extra_content`` (Gemini's OpenAI-compatible endpoint puts the thought
    signature there) is kept in ``extra["extra_content"]`` and sent back with the call.
    """
    calls = []
    raw_calls = opt_list(message, "tool_calls", where) or []
    for position, raw in enumerate(raw_calls):
        at = f"{where}.tool_calls[{position}]"
        req_obj(raw, at)
        kind = opt_str(raw, "type", at) or "function"
        body = opt_obj(raw, "custom" if kind == "custom" else "function", at)
        if body is None:
            raise FormatError(f'{at} has no "{kind}" object')
        body_at = f"{at}.{kind}"
        name = opt_str(body, "name", body_at) or ""
        arguments = body.get("input") if kind == "custom" else body.get("arguments")
        extra: dict[str, Any] = {"type": "custom"} if kind == "custom" else {}
        extra_content = opt_obj(raw, "extra_content", at)
        if extra_content is not None:
            extra["extra_content"] = extra_content
        call_id = opt_id(raw, "id", at)
        calls.append(tool_call(call_id, name, arguments, position, extra, salt=id_salt))
    legacy = opt_obj(message, "function_call", where)
    if legacy is not None:
        name = opt_str(legacy, "name", f"{where}.function_call") or ""
        extra = {"legacy_function_call": True}
        calls.append(
            tool_call(None, name, legacy.get("arguments"), len(calls), extra, salt=id_salt)
        )
    return tuple(calls)


def assistant_messages(parsed: ParsedResponse) -> list[dict[str, Any]]:
    """The assistant turn in request shape: one ``role: assistant`` message with the
    text, the ``tool_calls`` (``extra_content`` replayed with its call) and the
    ``reasoning_content`` the server sent (DeepSeek's thinking mode needs it back)."""
    message: dict[str, Any] = {"role": "assistant", "content": parsed.text or None}
    for part in parsed.parts or ():
        if part.kind == "opaque":
            message.update(thaw(part.value))
    if parsed.calls:
        message["tool_calls"] = [_wire_call(call) for call in parsed.calls]
    return [message]


def _wire_call(call: ToolCallRequest) -> dict[str, Any]:
    arguments = argument_text(call.arguments)
    wire: dict[str, Any]
    if call.extra.get("type") == "custom":
        wire = {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": arguments}}
    else:
        function = {"name": call.name, "arguments": arguments}
        wire = {"id": call.id, "type": "function", "function": function}
    if "extra_content" in call.extra:
        wire["extra_content"] = thaw(call.extra["extra_content"])
    return wire


def argument_text(arguments: Any) -> str:
    """Arguments as the JSON text OpenAI's APIs replay (text stays as the model wrote it)."""
    if isinstance(arguments, str):
        return arguments
    return to_json_text({} if arguments is None else arguments)


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
    if not isinstance(arguments, dict) or not spec.has_parameters:
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


class OpenAIChatStream(StreamAdapter):
    """OpenAI Chat Completions chunks: ``choices[].delta.tool_calls[]`` fragments.

    Only choice `choice` is followed. A fragment's index keys its call; a new id under
    an index that is still open starts the next call; a fragment without an index
    continues the latest call unless it brings a new id. Any finish reason (``stop``
    included), or the ``"[DONE]"`` sentinel, closes the open calls. A fragment's
    ``extra_content`` (Gemini's thought signature) is kept with its call.
    """

    TRUNCATION_REASONS = TRUNCATION_REASONS

    def __init__(self, *, choice: int = 0, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._choice = choice
        self._reasoning: list[str] = []
        self._reasoning_item: dict[str, Any] | None = None

    def _add_reasoning(self, fragment: str) -> None:
        if self._reasoning_item is None:
            self._reasoning_item = {REASONING_KEY: ""}
            self.add_opaque(self._reasoning_item)
        self._reasoning.append(fragment)

    def close(self) -> list[ToolCallRequest]:
        if self._reasoning_item is not None:
            self._reasoning_item[REASONING_KEY] = "".join(self._reasoning)
        return super().close()

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        finished: list[ToolCallRequest] = []
        for number, choice in enumerate(opt_list(data, "choices", "chunk") or ()):
            where = f"chunk.choices[{number}]"
            req_obj(choice, where)
            if (opt_index(choice, "index", where) or 0) != self._choice:
                continue
            delta = opt_obj(choice, "delta", where) or {}
            at_delta = where + ".delta"
            content = opt_str(delta, "content", at_delta)
            reasoning = opt_str(delta, REASONING_KEY, at_delta)
            if reasoning:
                self._add_reasoning(reasoning)
            if content:
                self.add_text(content)
            fragments = opt_list(delta, "tool_calls", at_delta) or ()
            for position, fragment in enumerate(fragments):
                at = f"{at_delta}.tool_calls[{position}]"
                finished.extend(self._fragment(req_obj(fragment, at), at))
            reason = opt_str(choice, "finish_reason", where)
            if reason:
                self.finish_reason = reason
                finished.extend(self.finish_all())
        return finished

    def _fragment(self, fragment: Mapping[str, Any], where: str) -> list[ToolCallRequest]:
        call_id = opt_id(fragment, "id", where)
        function = opt_obj(fragment, "function", where) or {}
        name = opt_str(function, "name", f"{where}.function") or ""
        arguments = function.get("arguments")
        index = opt_index(fragment, "index", where)
        extra_content = opt_obj(fragment, "extra_content", where)
        last = (
            self._last_key if self._last_key is not None and self.is_open(self._last_key) else None
        )
        if index is not None:
            key: Hashable = ("index", index)
            # a server that leaves the index out of the first fragment only
            if (
                last is not None
                and isinstance(last, tuple)
                and last[0] == "unindexed"
                and not self.is_open(key)
                and (call_id is None or self._open[last].call_id in (None, call_id))
            ):
                self.rekey(last, key)
        elif last is not None:
            key = last
        else:
            key = ("unindexed", self.calls_started)

        finished: list[ToolCallRequest] = []
        current = self._open.get(key)
        if current is not None and call_id is not None and current.call_id not in (None, call_id):
            if index is None:
                key = ("unindexed", self.calls_started)
            current = None
        elif (
            current is not None
            and index is None
            and name
            and current.name
            and name != current.name
            and current.fragments
        ):
            # no index and no id: another name after a call that has its arguments is
            # the next call (servers that send whole calls one per chunk)
            key, current = ("unindexed", self.calls_started), None
        if current is None:
            finished = self.open(key, call_id=call_id, name=name)
        else:
            if name and name != current.name:
                # Some servers resend the whole name in every fragment; others split it.
                self.add_name(key, name)
            current.call_id = current.call_id or call_id
        if extra_content is not None:
            self._open[key].extra["extra_content"] = extra_content
        if isinstance(arguments, str):
            if arguments:
                self.add_arguments(key, arguments)
        elif arguments is not None:  # a server that sends the decoded object
            self._open[key].whole_arguments = arguments
        return finished


# --- history -------------------------------------------------------------------------


def _chat_result(call_id: str, name: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT}


HISTORY = HistoryShape(_chat_result, text_arguments=True)
"""Where this format keeps calls and results in a stored history: calls in ``tool_calls``
(arguments replayed as JSON text), results as ``role: tool`` messages."""


def repair_history(messages: Sequence[Mapping[str, Any]]) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of a stored history in this format, and what was changed (see
    `toolbridge.formats.repair`). Raises only `FormatError`."""
    return repair(messages, HISTORY)
