"""`repair_history`: make stored messages acceptable to a provider again, and say how.

This is the lenient path, for replaying history only; new calls are never repaired
for execution. It fixes what providers reject: a call without a result gets a
synthetic error result, an orphan or duplicate result is dropped, a result that
strayed from its call is moved back next to it, unparseable stored arguments become
the object json-repair recovers (or ``{}``), a nameless call is removed, and a call
without arguments gets the empty object the provider expects. The input is never
modified; every change is reported as a `HistoryChange`.

Supported shapes: ``openai_chat`` (messages), ``openai_responses`` (input items)
and ``anthropic`` (messages).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge.calls import ArgumentsDecodeError, decode_arguments, repair_arguments_for_replay
from toolbridge.formats.call_ids import generated_call_id
from toolbridge.formats.types import FormatError, HistoryAction, HistoryChange
from toolbridge.schema import thaw

__all__ = ["MISSING_RESULT", "repair_history"]

MISSING_RESULT = (
    "Error: this call has no recorded result; it was interrupted or its result was lost. "
    "Do not assume it ran; call it again if it is still needed."
)

Messages = list[dict[str, Any]]


class _Log:
    """Collects the changes of one repair."""

    def __init__(self) -> None:
        self.changes: list[HistoryChange] = []

    def add(self, action: HistoryAction, index: int, call_id: Any, detail: str) -> None:
        shown = call_id if isinstance(call_id, str) else None
        self.changes.append(HistoryChange(action, index, shown, detail))


def repair_history(
    messages: Sequence[Mapping[str, Any]], format: str
) -> tuple[Messages, list[HistoryChange]]:
    """A repaired copy of `messages` in `format` and the list of what was changed."""
    repairers: dict[str, Callable[[Messages, _Log], Messages]] = {
        "openai_chat": _repair_chat,
        "openai_responses": _repair_responses,
        "anthropic": _repair_anthropic,
    }
    repair = repairers.get(format)
    if repair is None:
        raise FormatError(
            f"repair_history does not know the format {format!r}; use one of "
            + ", ".join(sorted(repairers))
        )
    copied = [thaw(m) for m in messages]
    for index, message in enumerate(copied):
        if not isinstance(message, dict):
            raise FormatError(f"message {index} is not an object")
    log = _Log()
    return repair(copied, log), log.changes


# --- arguments -----------------------------------------------------------------------


def _argument_text(raw: Any, index: int, call_id: Any, log: _Log) -> str:
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


def _argument_object(raw: Any, index: int, call_id: Any, log: _Log) -> dict[str, Any]:
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


def _call_id(call_id: Any, index: int, position: int, name: str, log: _Log) -> str:
    if isinstance(call_id, str) and call_id:
        return call_id
    new_id = generated_call_id(position, name, None, salt=f"history-{index}")
    log.add("added_call_id", index, new_id, f"call {name!r} had no id")
    return new_id


# --- one turn of calls and the results that answer it ------------------------------------


@dataclass
class _Turn:
    """An assistant message's calls and, by id, the results found for them so far."""

    index: int
    call_ids: list[str]
    results: dict[str, Any] = field(default_factory=dict)
    held: Messages = field(default_factory=list)  # other messages seen before the flush
    reply: list[Any] | None = None  # Anthropic: other blocks of the first user reply

    def take(self, call_id: Any, result: Any, index: int, moved: bool, log: _Log) -> bool:
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

    def answers(self, synthetic: Callable[[str], Any], log: _Log) -> list[Any]:
        """The results in call order, a synthetic error result for each missing one."""
        out = []
        for call_id in self.call_ids:
            if call_id not in self.results:
                log.add("added_missing_result", self.index, call_id, "synthetic error result")
                out.append(synthetic(call_id))
            else:
                out.append(self.results[call_id])
        return out


# --- OpenAI chat ---------------------------------------------------------------------------


def _repair_chat(messages: Messages, log: _Log) -> Messages:
    out: Messages = []
    turn: _Turn | None = None

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            out.extend(turn.answers(_chat_result, log))
            out.extend(turn.held)
            turn = None

    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if turn is None:
                log.add("dropped_orphan_result", index, call_id, "no call before it has its id")
            else:
                turn.take(call_id, message, index, bool(turn.held), log)
            continue
        if role == "assistant":
            flush()
            if message.get("tool_calls"):
                call_ids = _fix_chat_calls(message, index, log)
                if call_ids:
                    out.append(message)
                    turn = _Turn(index, call_ids)
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


def _fix_chat_calls(message: dict[str, Any], index: int, log: _Log) -> list[str]:
    kept, call_ids = [], []
    for position, call in enumerate(message.get("tool_calls") or []):
        function = _get(call, "function")
        name = _get(function, "name")
        if not isinstance(call, dict) or not isinstance(function, dict) or not name:
            log.add("removed_nameless_call", index, _get(call, "id"), "a call without a name")
            continue
        if not isinstance(name, str):
            log.add("removed_nameless_call", index, call.get("id"), "a name that is not text")
            continue
        call["id"] = _call_id(call.get("id"), index, position, name, log)
        function["arguments"] = _argument_text(function.get("arguments"), index, call["id"], log)
        kept.append(call)
        call_ids.append(call["id"])
    if kept:
        message["tool_calls"] = kept
    else:
        del message["tool_calls"]
    return call_ids


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _chat_result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT}


# --- OpenAI Responses ------------------------------------------------------------------


def _repair_responses(items: Messages, log: _Log) -> Messages:
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
            call_id = item["call_id"] = _call_id(item.get("call_id"), index, 0, name, log)
            item["arguments"] = _argument_text(item.get("arguments"), index, call_id, log)
            if call_id in waiting:  # a new call reuses the id of one never answered
                earlier_position, earlier_index = waiting[call_id]
                unanswered.append((earlier_position, call_id, earlier_index))
            waiting[call_id] = (len(out), index)
            answered.discard(call_id)
        elif kind == "function_call_output":
            output_id = item.get("call_id")
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


# --- Anthropic ---------------------------------------------------------------------------


def _repair_anthropic(messages: Messages, log: _Log) -> Messages:
    out: Messages = []
    turn: _Turn | None = None

    def flush() -> None:
        nonlocal turn
        if turn is not None:
            content = turn.answers(_anthropic_result, log) + (turn.reply or [])
            out.append({"role": "user", "content": content})
            out.extend(turn.held)
            turn = None

    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        blocks = content if isinstance(content, list) else []
        if role == "assistant":
            flush()
            if any(_is_block(b, "tool_use") for b in blocks):
                call_ids = _fix_tool_uses(message, blocks, index, log)
                turn = _Turn(index, call_ids) if call_ids else None
                if not message["content"]:
                    log.add("dropped_empty_message", index, None, "no text and no valid call")
                    continue
            out.append(message)
            continue
        results = [b for b in blocks if _is_block(b, "tool_result")]
        if role != "user" or (turn is None and not results):
            (turn.held if turn is not None else out).append(message)
            continue
        first_reply = turn is not None and turn.reply is None
        for block in results:
            call_id = block.get("tool_use_id")
            if turn is None:
                log.add("dropped_orphan_result", index, call_id, "no call before it has its id")
            else:
                turn.take(call_id, block, index, not first_reply, log)
        others = [b for b in blocks if not _is_block(b, "tool_result")]
        if isinstance(content, str):
            others = [{"type": "text", "text": content}]
        if turn is not None and first_reply:
            turn.reply = others
        elif others:
            (turn.held if turn is not None else out).append({**message, "content": others})
        else:
            log.add("dropped_empty_message", index, None, "only dropped results were left")
    flush()
    return out


def _is_block(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind


def _fix_tool_uses(message: dict[str, Any], blocks: list[Any], index: int, log: _Log) -> list[str]:
    kept, call_ids = [], []
    for position, block in enumerate(blocks):
        if not _is_block(block, "tool_use"):
            kept.append(block)
            continue
        name = block.get("name")
        if not isinstance(name, str) or not name:
            log.add("removed_nameless_call", index, block.get("id"), "a tool_use without a name")
            continue
        block["id"] = _call_id(block.get("id"), index, position, name, log)
        block["input"] = _argument_object(block.get("input"), index, block["id"], log)
        kept.append(block)
        call_ids.append(block["id"])
    message["content"] = kept
    return call_ids


def _anthropic_result(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": MISSING_RESULT,
        "is_error": True,
    }
