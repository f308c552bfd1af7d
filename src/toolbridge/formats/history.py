"""`repair_history`: make stored messages acceptable to a provider again, and say how.

This is the lenient path, for replaying history only; new calls are never repaired
for execution. It fixes what providers reject: a call without a result gets a
synthetic error result, an orphan or duplicate result is dropped, a result that
strayed from its call is moved back next to it, unparseable stored arguments become
the object json-repair recovers (or ``{}``), a nameless call is removed, and a call
without arguments gets the empty object the provider expects. The input is never
modified; every change is reported as a `HistoryChange`.

Supported shapes: ``openai_chat`` and ``ollama`` (messages), ``openai_responses``
(input items), ``anthropic`` and ``bedrock`` (messages of content blocks) and
``gemini`` (``contents``). Ollama and Gemini calls usually carry no id: their results
answer the next unanswered call of the same name, in order, and no id is added.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge.calls import ArgumentsDecodeError, decode_arguments, repair_arguments_for_replay
from toolbridge.formats.call_ids import generated_call_id
from toolbridge.formats.types import FormatError, HistoryAction, HistoryChange
from toolbridge.formats.wire import check_depth, json_type, req_obj
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
    """A repaired copy of `messages` in `format` and the list of what was changed.

    Raises only `FormatError`: for an unknown format, and for a history that is not a
    list of message objects, nests deeper than `toolbridge.formats.wire.MAX_DEPTH`, or
    keeps its calls in something other than a list. A call id that is not a string is
    treated as missing (a new one is generated where the provider needs ids).
    """
    if format not in _SHAPES and format != "openai_responses":
        raise FormatError(
            f"repair_history does not know the format {format!r}; use one of "
            + ", ".join(sorted([*_SHAPES, "openai_responses"]))
        )
    if isinstance(messages, str | bytes | bytearray | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise FormatError(f"the history must be a list of messages, got {json_type(messages)}")
    check_depth(messages, "the history")
    copied = [thaw(m) for m in messages]
    for index, message in enumerate(copied):
        req_obj(message, f"messages[{index}]")
    log = _Log()
    if format == "openai_responses":
        return _repair_responses(copied, log), log.changes
    shape = _SHAPES[format]
    repair = _repair_blocks if shape.call else _repair_chat
    return repair(copied, log, shape), log.changes


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


# --- where each provider keeps its calls and results ------------------------------------


@dataclass(frozen=True)
class _Shape:
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

    def add(self, call: dict[str, Any], name: str, position: int, shape: _Shape, log: _Log) -> Any:
        """Open a call; its key is its id (generated where needed), else name and position."""
        call_id = call.get(shape.call_id)
        if shape.ids:
            call_id = call[shape.call_id] = _call_id(call_id, self.index, position, name, log)
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

    def answers(self, synthetic: Callable[[Any, str], Any], log: _Log) -> list[Any]:
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


def _repair_chat(messages: Messages, log: _Log, shape: _Shape) -> Messages:
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


def _fix_chat_calls(message: dict[str, Any], index: int, log: _Log, shape: _Shape) -> _Turn | None:
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
        arguments = _argument_text if shape.text_arguments else _argument_object
        function["arguments"] = arguments(function.get("arguments"), index, key, log)
        kept.append(call)
    if kept:
        message["tool_calls"] = kept
    else:
        del message["tool_calls"]
    return turn if kept else None


def _text_id(value: Any) -> str | None:
    """A stored id as a key: a string, else None (an unhashable id never reaches a dict)."""
    return value if isinstance(value, str) else None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _chat_result(call_id: str, name: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT}


def _ollama_result(call_id: Any, name: str) -> dict[str, Any]:
    return {"role": "tool", "content": MISSING_RESULT, "tool_name": name}


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
            output_id = _text_id(item.get("call_id"))
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


# --- Anthropic, Bedrock and Gemini --------------------------------------------------------


def _repair_blocks(messages: Messages, log: _Log, shape: _Shape) -> Messages:
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
    message: dict[str, Any], blocks: list[Any], index: int, log: _Log, shape: _Shape
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
        call[shape.arguments] = _argument_object(call.get(shape.arguments), index, key, log)
        kept.append(block)
    message[shape.content] = kept
    return turn if turn.call_ids else None


def _anthropic_result(call_id: str, name: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": MISSING_RESULT,
        "is_error": True,
    }


def _bedrock_result(call_id: str, name: str) -> dict[str, Any]:
    content = [{"text": MISSING_RESULT}]
    return {"toolResult": {"toolUseId": call_id, "content": content, "status": "error"}}


def _gemini_result(call_id: Any, name: str) -> dict[str, Any]:
    response = {"name": name, "response": {"error": MISSING_RESULT}}
    return {
        "functionResponse": {"id": call_id, **response} if isinstance(call_id, str) else response
    }


_SHAPES = {
    "openai_chat": _Shape(_chat_result, text_arguments=True),
    "ollama": _Shape(_ollama_result, result_name="tool_name", ids=False),
    "anthropic": _Shape(
        _anthropic_result,
        "tool_use",
        "tool_result",
        result_id="tool_use_id",
        arguments="input",
        typed=True,
    ),
    "bedrock": _Shape(
        _bedrock_result, "toolUse", "toolResult", "toolUseId", "toolUseId", arguments="input"
    ),
    "gemini": _Shape(
        _gemini_result,
        "functionCall",
        "functionResponse",
        result_id="id",
        result_name="name",
        arguments="args",
        content="parts",
        assistant="model",
        ids=False,
    ),
}
