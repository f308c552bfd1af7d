"""The history repair engine: make stored messages acceptable to a provider again, and
say how. Provider-free: each provider module describes where it keeps calls and
results as a `HistoryShape` and calls `repair`; `toolbridge.formats.history` picks the
provider by format name.

This is the lenient path, for replaying history only; new calls are never repaired
for execution. It fixes what providers reject: a call without a result gets a
synthetic error result, an orphan or duplicate result is dropped, a result that
strayed from its call is moved back next to it, unparseable stored arguments become
the object json-repair recovers (or ``{}``), a nameless call is removed, and a call
without arguments gets the empty object the provider expects. The input is never
modified; every change is reported as a `HistoryChange`. Calls without ids (Ollama,
Gemini) are answered by the next unanswered call of the same name, in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge.core.calls import (
    ArgumentsDecodeError,
    decode_arguments,
    repair_arguments_for_replay,
)
from toolbridge.core.frozen import thaw
from toolbridge.formats.call_ids import generated_call_id
from toolbridge.formats.types import FormatError, HistoryAction, HistoryChange
from toolbridge.formats.wire import check_depth, json_type, req_obj

__all__ = [
    "MISSING_RESULT",
    "HistoryShape",
    "Messages",
    "RepairLog",
    "argument_object",
    "argument_text",
    "call_id_for",
    "checked_copy",
    "repair",
    "text_id",
]

MISSING_RESULT = (
    "Error: this call has no recorded result; it was interrupted or its result was lost. "
    "Do not assume it ran; call it again if it is still needed."
)

Messages = list[dict[str, Any]]


class RepairLog:
    """Collects the changes of one repair."""

    def __init__(self) -> None:
        self.changes: list[HistoryChange] = []

    def add(self, action: HistoryAction, index: int, call_id: Any, detail: str) -> None:
        shown = call_id if isinstance(call_id, str) else None
        self.changes.append(HistoryChange(action, index, shown, detail))


def checked_copy(messages: Sequence[Mapping[str, Any]]) -> Messages:
    """The one boundary check of every repair: a list of message objects no deeper than
    `toolbridge.formats.wire.MAX_DEPTH`, copied so the input is never modified."""
    if isinstance(messages, str | bytes | bytearray | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise FormatError(f"the history must be a list of messages, got {json_type(messages)}")
    check_depth(messages, "the history")
    copied = [thaw(m) for m in messages]
    for index, message in enumerate(copied):
        req_obj(message, f"messages[{index}]")
    return copied


def repair(
    messages: Sequence[Mapping[str, Any]], shape: HistoryShape
) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of `messages` kept in `shape`, and what was changed.

    Raises only `FormatError` (see `checked_copy`; calls kept in something other than a
    list). A call id that is not a string is treated as missing.
    """
    copied = checked_copy(messages)
    log = RepairLog()
    run = _repair_blocks if shape.call else _repair_chat
    return run(copied, log, shape), log.changes


# --- arguments -----------------------------------------------------------------------


def argument_text(raw: Any, index: int, call_id: Any, log: RepairLog) -> str:
    """Stored arguments as the JSON object text OpenAI's APIs replay."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        log.add("filled_empty_arguments", index, call_id, "no arguments; sent as {}")
        return "{}"
    if isinstance(raw, str):
        try:
            if isinstance(decode_arguments(raw), dict):
                return raw
        except ArgumentsDecodeError:
            pass
    repaired = repair_arguments_for_replay(raw)
    log.add("repaired_arguments", index, call_id, f"stored arguments {_clip(raw)} -> {repaired}")
    return json.dumps(repaired, ensure_ascii=False)


def argument_object(raw: Any, index: int, call_id: Any, log: RepairLog) -> dict[str, Any]:
    """Stored arguments as the JSON object Anthropic replays."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        log.add("filled_empty_arguments", index, call_id, "no input; sent as {}")
        return {}
    repaired = repair_arguments_for_replay(raw)
    log.add("repaired_arguments", index, call_id, f"stored input {_clip(raw)} -> {repaired}")
    return repaired


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return repr(text if len(text) <= 80 else text[:77] + "...")


def call_id_for(call_id: Any, index: int, position: int, name: str, log: RepairLog) -> str:
    if isinstance(call_id, str) and call_id:
        return call_id
    new_id = generated_call_id(position, name, None, salt=f"history-{index}")
    log.add("added_call_id", index, new_id, f"call {name!r} had no id")
    return new_id


# --- where each provider keeps its calls and results ------------------------------------


@dataclass(frozen=True)
class HistoryShape:
    """Where one provider keeps its calls and results, and what a synthetic result is.

    Chat shapes (OpenAI chat, Ollama) carry calls in ``tool_calls`` and results as
    ``role: tool`` messages; block shapes (Anthropic, Bedrock, Gemini) carry both as
    blocks of a message's `content`, results in the user message after the calls.
    """

    synthetic: Callable[[Any, str], Any]  # (call key, call name) -> a result message or block
    call: str = ""  # blocks: the type (Anthropic) or key (Bedrock, Gemini) of a call block
    result: str = ""  # blocks: the same for a result block
    call_id: str = "id"
    result_id: str = "tool_call_id"
    result_name: str | None = None  # results without an id answer the next open call so named
    arguments: str = "arguments"
    content: str = "content"
    assistant: str = "assistant"
    ids: bool = True  # calls need ids (missing ones are generated); else keyed by name, position
    text_arguments: bool = False  # arguments replayed as JSON text (OpenAI chat)
    typed: bool = False  # blocks are told apart by ``type`` (Anthropic), else by their one key

    def inner(self, block: Any, kind: str) -> Any:
        """The call or result a block holds (None: not that kind of block)."""
        if not isinstance(block, dict):
            return None
        if self.typed:
            return block if block.get("type") == kind else None
        return block.get(kind)

    def text(self, text: str) -> dict[str, Any]:
        return {"type": "text", "text": text} if self.typed else {"text": text}


# --- one turn of calls and the results that answer it ------------------------------------


@dataclass
class _Turn:
    """An assistant message's calls and, by key, the results found for them so far."""

    index: int
    call_ids: list[Any]  # keys: the call id, or (name, position) where calls have no id
    names: list[str]
    results: dict[Any, Any] = field(default_factory=dict)
    held: Messages = field(default_factory=list)  # other messages seen before the flush
    reply: list[Any] | None = None  # block shapes: other blocks of the first user reply

    def add(
        self, call: dict[str, Any], name: str, position: int, shape: HistoryShape, log: RepairLog
    ) -> Any:
        """Open a call; its key is its id (generated where needed), else name and position."""
        call_id = call.get(shape.call_id)
        if shape.ids:
            call_id = call[shape.call_id] = call_id_for(call_id, self.index, position, name, log)
        key = call_id if isinstance(call_id, str) and call_id else (name, position)
        self.call_ids.append(key)
        self.names.append(name)
        return key

    def key(self, call_id: Any, name: Any) -> Any:
        """The call a result answers: the one with its id, else the next open one of its name."""
        if isinstance(call_id, str) and call_id:
            return call_id
        named = [k for k, n in zip(self.call_ids, self.names, strict=True) if n == name]
        return next((k for k in named if k not in self.results), named[0] if named else None)

    def take(self, call_id: Any, result: Any, index: int, moved: bool, log: RepairLog) -> bool:
        """Keep `result` if it answers an open call of this turn; report what happened."""
        if call_id in self.results:
            log.add("dropped_duplicate_result", index, call_id, "a second result for one call")
        elif call_id in self.call_ids:
            self.results[call_id] = result
            if moved:
                log.add("moved_result", index, call_id, "moved next to its call")
            return True
        else:
            log.add("dropped_orphan_result", index, call_id, "no call in this turn has its id")
        return False

    def answers(self, synthetic: Callable[[Any, str], Any], log: RepairLog) -> list[Any]:
        """The results in call order, a synthetic error result for each missing one."""
        out = []
        for call_id, name in zip(self.call_ids, self.names, strict=True):
            if call_id not in self.results:
                log.add("added_missing_result", self.index, call_id, "synthetic error result")
                out.append(synthetic(call_id, name))
            else:
                out.append(self.results[call_id])
        return out


# --- OpenAI chat and Ollama ----------------------------------------------------------------


def _repair_chat(messages: Messages, log: RepairLog, shape: HistoryShape) -> Messages:
    out: Messages = []
    turn: _Turn | None = None

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            out.extend(turn.answers(shape.synthetic, log))
            out.extend(turn.held)
            turn = None

    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get(shape.result_id)
            if turn is None:
                log.add("dropped_orphan_result", index, call_id, "no call before it has its id")
            else:
                name = message.get(shape.result_name) if shape.result_name else None
                turn.take(turn.key(call_id, name), message, index, bool(turn.held), log)
            continue
        if role == "assistant":
            flush()
            if message.get("tool_calls"):
                turn = _fix_chat_calls(message, index, log, shape)
                if turn is not None:
                    out.append(message)
                    continue
                if not message.get("content"):
                    log.add("dropped_empty_message", index, None, "no text and no valid call")
                    continue
        if turn is not None:
            turn.held.append(message)
        else:
            out.append(message)
    flush()
    return out


def _fix_chat_calls(
    message: dict[str, Any], index: int, log: RepairLog, shape: HistoryShape
) -> _Turn | None:
    kept: list[Any] = []
    turn = _Turn(index, [], [])
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise FormatError(f"messages[{index}].tool_calls must be an array, got {json_type(calls)}")
    for position, call in enumerate(calls):
        function = _get(call, "function")
        name = _get(function, "name")
        if not isinstance(call, dict) or not isinstance(function, dict) or not name:
            log.add("removed_nameless_call", index, _get(call, "id"), "a call without a name")
            continue
        if not isinstance(name, str):
            log.add("removed_nameless_call", index, call.get("id"), "a name that is not text")
            continue
        key = turn.add(call, name, position, shape, log)
        arguments = argument_text if shape.text_arguments else argument_object
        function["arguments"] = arguments(function.get("arguments"), index, key, log)
        kept.append(call)
    if kept:
        message["tool_calls"] = kept
    else:
        del message["tool_calls"]
    return turn if kept else None


def text_id(value: Any) -> str | None:
    """A stored id as a key: a string, else None (an unhashable id never reaches a dict)."""
    return value if isinstance(value, str) else None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


# --- Anthropic, Bedrock and Gemini --------------------------------------------------------


def _repair_blocks(messages: Messages, log: RepairLog, shape: HistoryShape) -> Messages:
    out: Messages = []
    turn: _Turn | None = None

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            content = turn.answers(shape.synthetic, log) + (turn.reply or [])
            out.append({"role": "user", shape.content: content})
            out.extend(turn.held)
            turn = None

    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get(shape.content)
        blocks = content if isinstance(content, list) else []
        if role == shape.assistant:
            flush()
            if any(shape.inner(b, shape.call) is not None for b in blocks):
                turn = _fix_block_calls(message, blocks, index, log, shape)
                if not message[shape.content]:
                    log.add("dropped_empty_message", index, None, "no text and no valid call")
                    continue
            out.append(message)
            continue
        results = [b for b in blocks if shape.inner(b, shape.result) is not None]
        if role != "user" or (turn is None and not results):
            (turn.held if turn is not None else out).append(message)
            continue
        first_reply = turn is not None and turn.reply is None
        for block in results:
            result = shape.inner(block, shape.result)
            call_id = _get(result, shape.result_id)
            if turn is None:
                log.add("dropped_orphan_result", index, call_id, "no call before it has its id")
            else:
                name = _get(result, shape.result_name) if shape.result_name else None
                turn.take(turn.key(call_id, name), block, index, not first_reply, log)
        others = [b for b in blocks if shape.inner(b, shape.result) is None]
        if isinstance(content, str):
            others = [shape.text(content)]
        if turn is not None and first_reply:
            turn.reply = others
        elif others:
            (turn.held if turn is not None else out).append({**message, shape.content: others})
        else:
            log.add("dropped_empty_message", index, None, "only dropped results were left")
    flush()
    return out


def _fix_block_calls(
    message: dict[str, Any], blocks: list[Any], index: int, log: RepairLog, shape: HistoryShape
) -> _Turn | None:
    kept: list[Any] = []
    turn = _Turn(index, [], [])
    for position, block in enumerate(blocks):
        call = shape.inner(block, shape.call)
        if call is None:
            kept.append(block)
            continue
        name = _get(call, "name")
        if not isinstance(name, str) or not name:
            log.add(
                "removed_nameless_call", index, _get(call, shape.call_id), "a call without a name"
            )
            continue
        key = turn.add(call, name, position, shape, log)
        call[shape.arguments] = argument_object(call.get(shape.arguments), index, key, log)
        kept.append(block)
    message[shape.content] = kept
    return turn if turn.call_ids else None
