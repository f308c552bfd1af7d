"""OpenAI Responses: flat ``function`` tools out, ``function_call`` items in,
``function_call_output`` items back.

Two ids travel with a call: ``call_id`` links the output to the call and becomes
`ToolCallRequest.id`; the item's own ``id`` (``fc_...``) is kept in
``extra["item_id"]`` for replaying the item as it was. The API treats a missing
``strict`` as true, so every definition states it.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.frozen import thaw
from toolbridge.core.tool import ImageBlock
from toolbridge.formats.assembler import StreamAdapter
from toolbridge.formats.call_ids import tool_call
from toolbridge.formats.openai_chat import (
    adapt_parameters,
    argument_text,
    function_spec,
    restore_strict_arguments,
)
from toolbridge.formats.repair import (
    MISSING_RESULT,
    Messages,
    RepairLog,
    call_id_for,
    checked_copy,
    text_id,
)
from toolbridge.formats.repair import (
    argument_text as replay_argument_text,
)
from toolbridge.formats.types import (
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
    "OpenAIResponsesStream",
    "assistant_messages",
    "definitions",
    "parse_definitions",
    "parse_response",
    "repair_history",
    "result_messages",
    "tool_search_definitions",
]

TRUNCATION_REASONS = frozenset({"max_output_tokens"})
_CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
# Item fields echoed back verbatim when the call is replayed.
_KEPT_FIELDS = ("namespace", "caller")


def definitions(tools: ToolSource, *, strict: bool | None = False) -> list[dict[str, Any]]:
    """The ``tools`` array: ``{"type": "function", "name", "parameters", "strict"}``.

    The API requires both keys: a tool with no parameters sends ``"parameters": null``.
    """
    out = []
    for spec in tool_specs(tools):
        tool: dict[str, Any] = {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
        }
        if spec.has_parameters or strict is True:
            tool["parameters"], tool["strict"] = adapt_parameters(spec, strict)
        else:
            tool["parameters"], tool["strict"] = None, False
        out.append(tool)
    return out


def tool_search_definitions(
    definitions: Sequence[Mapping[str, Any]],
    deferred: Collection[str],
    namespaces: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The ``tools`` array for the Responses API's own tool search: ``{"type":
    "tool_search"}`` first, then every definition, those named in `deferred` with
    ``"defer_loading": true``.

    `namespaces` maps a tool's name to its group (an MCP server's name): a group's
    functions go, in their order, into one ``{"type": "namespace"}`` tool at the place
    of its first one, so the model first sees only the group's name and description.
    The functions keep their names, so a call (which comes back with its
    ``namespace``) names the tool as registered.
    """
    groups = dict(namespaces or {})
    tools: list[dict[str, Any]] = [{"type": "tool_search"}]
    spaces: dict[str, dict[str, Any]] = {}
    for item in definitions:
        tool = dict(item)
        name = tool.get("name")
        if name in deferred:
            tool["defer_loading"] = True
        group = groups.get(name) if isinstance(name, str) else None
        if group is None:
            tools.append(tool)
            continue
        space = spaces.get(group)
        if space is None:
            space = spaces[group] = {
                "type": "namespace",
                "name": group,
                "description": f"The tools of the MCP server {group!r}.",
                "tools": [],
            }
            tools.append(space)
        space["tools"].append(tool)
    return tools


def parse_definitions(tools: Iterable[Mapping[str, Any]]) -> list[ToolSpec]:
    """Read a ``tools`` array back into `ToolSpec`s (the parameters as sent; ``null``:
    `NO_PARAMETERS`). Raises only `FormatError`."""
    specs = []
    for index, item in enumerate(definition_items(tools)):
        if item.get("type") != "function":
            raise FormatError(f'tools[{index}] is not a {{"type": "function"}} tool')
        specs.append(function_spec(item, f"tools[{index}]"))
    return specs


def parse_response(
    payload: Any,
    *,
    tools: ToolSource | None = None,
    strict: bool | None = False,
    id_salt: str = "",
) -> ParsedResponse:
    """A Responses API response -> text and calls (``call_id`` as the call's id).

    Reasoning items (and any other output item that is neither a message nor a call)
    are kept in `ParsedResponse.parts` to be sent back as they came. Raises only
    `FormatError` for a payload of the wrong shape.
    """
    data = as_payload(payload, "OpenAI Responses")
    output = opt_list(data, "output", "response")
    if output is None:
        raise FormatError('an OpenAI Responses response needs an "output" list')
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    parts: list[TurnPart] = []
    cut_call = False
    for index, item in enumerate(output):
        where = f"output[{index}]"
        req_obj(item, where)
        kind = opt_str(item, "type", where)
        if kind == "message":
            text = _message_text(item, where)
            texts.append(text)
            parts.append(TurnPart("text", text, _message_extra(item, where)))
        elif kind in _CALL_TYPES:
            parts.append(TurnPart("call", len(calls)))
            calls.append(_call(item, kind, len(calls), id_salt, where))
            cut_call = cut_call or item.get("status") == "incomplete"
        else:
            parts.append(TurnPart("opaque", item))
    parsed_calls = tuple(calls)
    if tools is not None:
        parsed_calls = restore_strict_arguments(parsed_calls, tools, strict=strict)
    details = opt_obj(data, "incomplete_details", "response")
    reason = opt_str(details, "reason", "incomplete_details") if details else None
    status = opt_str(data, "status", "response")
    return ParsedResponse(
        text="".join(texts),
        calls=parsed_calls,
        finish_reason=reason or status,
        truncated=reason in TRUNCATION_REASONS or cut_call,
        raw=data,
        parts=tuple(parts),
    )


def _message_text(item: Mapping[str, Any], where: str) -> str:
    texts = []
    for index, part in enumerate(opt_list(item, "content", where) or []):
        at = f"{where}.content[{index}]"
        req_obj(part, at)
        if opt_str(part, "type", at) == "output_text":
            texts.append(opt_str(part, "text", at) or "")
    return "".join(texts)


def _message_extra(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The message item's own id and status, replayed with its text."""
    return {k: item[k] for k in ("id", "status") if opt_str(item, k, where) is not None}


def _call(
    item: Mapping[str, Any], kind: str, position: int, salt: str, where: str
) -> ToolCallRequest:
    name = opt_str(item, "name", where) or ""
    arguments = item.get(_CALL_TYPES[kind])
    extra: dict[str, Any] = {k: item[k] for k in _KEPT_FIELDS if item.get(k) is not None}
    item_id = opt_str(item, "id", where)
    if item_id:
        extra["item_id"] = item_id
    if kind == "custom_tool_call":
        extra["type"] = "custom"
    call_id = opt_id(item, "call_id", where)
    return tool_call(call_id, name, arguments, position, extra, salt=salt)


def assistant_messages(parsed: ParsedResponse) -> list[dict[str, Any]]:
    """The turn as ``input`` items, in output order: reasoning items as received, each
    message as an assistant ``message`` item, each call as its ``function_call`` item
    (with its ``fc_`` id when it had one)."""
    items: list[dict[str, Any]] = []
    for part in turn_parts(parsed):
        if part.kind == "opaque":
            items.append(thaw(part.value))
        elif part.kind == "text":
            content = [{"type": "output_text", "text": part.value, "annotations": []}]
            message = {"type": "message", "role": "assistant", "content": content}
            items.append({**thaw(part.extra), **message})
        else:
            items.append(_wire_call(parsed.calls[part.value]))
    return items


def _wire_call(call: ToolCallRequest) -> dict[str, Any]:
    custom = call.extra.get("type") == "custom"
    item: dict[str, Any] = {
        "type": "custom_tool_call" if custom else "function_call",
        "call_id": call.id,
        "name": call.name,
        "input" if custom else "arguments": argument_text(call.arguments),
    }
    if isinstance(call.extra.get("item_id"), str):
        item["id"] = call.extra["item_id"]
    item.update({k: thaw(call.extra[k]) for k in _KEPT_FIELDS if k in call.extra})
    return item


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


_ARGUMENT_DELTAS = frozenset(
    {"response.function_call_arguments.delta", "response.custom_tool_call_input.delta"}
)
_ARGUMENT_DONES = frozenset(
    {"response.function_call_arguments.done", "response.custom_tool_call_input.done"}
)
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class OpenAIResponsesStream(StreamAdapter):
    """OpenAI Responses events: ``response.output_item.added``, argument deltas and
    ``.done``, ``response.output_item.done``. The call id is ``call_id``; the item ``id``
    is kept in ``extra["item_id"]``. Reasoning items are kept whole, from their
    ``output_item.done``, to be sent back."""

    TRUNCATION_REASONS = TRUNCATION_REASONS

    def __init__(self, *, id_salt: str = "") -> None:
        super().__init__(id_salt=id_salt)
        self._key_by_output_index: dict[int, Hashable] = {}
        self._cut_call = False

    def _feed(self, data: Mapping[str, Any]) -> list[ToolCallRequest]:
        kind = opt_str(data, "type", "event")
        if kind == "response.output_text.delta":
            self.add_text(opt_str(data, "delta", "event") or "")
        elif kind == "response.output_item.added":
            return self._item(data, done=False)
        elif kind in _ARGUMENT_DELTAS:
            key = self._key(data)
            if not self.is_open(key):
                self.open(key, extra=_item_extra(opt_str(data, "item_id", "event")))
            self.add_arguments(key, opt_str(data, "delta", "event") or "")
        elif kind in _ARGUMENT_DONES:
            key = self._key(data)
            whole = opt_str(data, "arguments", "event")
            whole = opt_str(data, "input", "event") if whole is None else whole
            if self.is_open(key) and whole is not None:
                self.set_arguments(key, whole)
        elif kind == "response.output_item.done":
            return self._item(data, done=True)
        elif kind in _ENDS:
            response = opt_obj(data, "response", "event") or {}
            details = opt_obj(response, "incomplete_details", "event.response") or {}
            reason = opt_str(details, "reason", "event.response.incomplete_details")
            self.finish_reason = reason or opt_str(response, "status", "event.response") or kind
            return self.finish_all()
        return []

    def _item(self, data: Mapping[str, Any], *, done: bool) -> list[ToolCallRequest]:
        item = opt_obj(data, "item", "event") or {}
        kind = opt_str(item, "type", "event.item")
        if kind not in _CALL_TYPES:
            if done and kind not in (None, "message"):
                self.add_opaque(thaw(item))  # reasoning: replayed as received
            return []
        item_id = opt_str(item, "id", "event.item")
        output_index = opt_index(data, "output_index", "event")
        key = self._key({"item_id": item_id, "output_index": output_index})
        finished: list[ToolCallRequest] = []
        if not self.is_open(key):
            finished = self.open(key, extra=_item_extra(item_id))
        buffer = self._open[key]
        buffer.call_id = opt_id(item, "call_id", "event.item") or buffer.call_id
        buffer.name = opt_str(item, "name", "event.item") or buffer.name
        if kind == "custom_tool_call":  # free-form input, as the whole-response parser keeps it
            buffer.extra["type"] = "custom"
        for field in _KEPT_FIELDS:  # the call's namespace (tool search): replayed with it
            if item.get(field) is not None:
                buffer.extra[field] = thaw(item[field])
        arguments = opt_str(item, _CALL_TYPES[kind], "event.item")
        if arguments is not None and (done or arguments):
            self.set_arguments(key, arguments)
        if done:
            self._cut_call = self._cut_call or item.get("status") == "incomplete"
            finished.append(self.finish(key))
        return finished

    def _key(self, data: Mapping[str, Any]) -> Hashable:
        output_index = opt_index(data, "output_index", "event")
        item_id = opt_str(data, "item_id", "event")
        key: Hashable = ("item", item_id) if item_id else ("output", output_index)
        if output_index is not None:
            key = self._key_by_output_index.setdefault(output_index, key)
        return key

    def truncated(self) -> bool:
        return super().truncated() or self._cut_call


def _item_extra(item_id: str | None) -> dict[str, Any]:
    return {"item_id": item_id} if item_id else {}


# --- history -------------------------------------------------------------------------


def repair_history(items: Sequence[Mapping[str, Any]]) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of stored ``input`` items, and what was changed: each
    ``function_call`` answered by one ``function_call_output`` after it (see
    `toolbridge.formats.repair`). Raises only `FormatError`."""
    log = RepairLog()
    return _repair_responses(checked_copy(items), log), log.changes


def _repair_responses(items: Messages, log: RepairLog) -> Messages:
    out: Messages = []
    # Ids can repeat across turns (Kimi's "functions.name:0" in every turn), so an output
    # answers the latest call with its id that is still waiting, never an earlier one.
    waiting: dict[str, tuple[int, int]] = {}  # call_id -> (position in out, input index)
    answered: set[str] = set()
    unanswered: list[tuple[int, str, int]] = []  # (position in out, call_id, input index)
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                log.add("removed_nameless_call", index, item.get("call_id"), "no name")
                continue
            call_id = item["call_id"] = call_id_for(item.get("call_id"), index, 0, name, log)
            item["arguments"] = replay_argument_text(item.get("arguments"), index, call_id, log)
            if call_id in waiting:  # a new call reuses the id of one never answered
                earlier_position, earlier_index = waiting[call_id]
                unanswered.append((earlier_position, call_id, earlier_index))
            waiting[call_id] = (len(out), index)
            answered.discard(call_id)
        elif kind == "function_call_output":
            output_id = text_id(item.get("call_id"))
            if output_id in waiting:
                del waiting[output_id]
                answered.add(output_id)
            elif output_id in answered:
                log.add("dropped_duplicate_result", index, output_id, "a second output")
                continue
            else:
                log.add("dropped_orphan_result", index, output_id, "no call before it has its id")
                continue
        out.append(item)
    unanswered += [(position, call_id, index) for call_id, (position, index) in waiting.items()]
    for call_position, call_id, _ in sorted(unanswered, reverse=True):
        after = call_position + 1  # after the run of calls and outputs the call is in
        while after < len(out) and out[after].get("type") in (
            "function_call",
            "function_call_output",
        ):
            after += 1
        out.insert(after, _responses_result(call_id))
    for _, call_id, index in sorted(unanswered, key=lambda entry: entry[2]):
        log.add("added_missing_result", index, call_id, "synthetic error output")
    return out


def _responses_result(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": MISSING_RESULT}
