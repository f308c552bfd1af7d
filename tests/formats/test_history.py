"""repair_history: stored conversations made acceptable again, with every change reported."""

from __future__ import annotations

import json
from typing import Any

import anthropic.types
import pytest
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from toolbridge.formats.history import MISSING_RESULT, repair_history
from toolbridge.formats.types import FormatError


def _call(call_id: str | None, name: str | None, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_openai_chat_history() -> None:
    messages = [
        {"role": "tool", "tool_call_id": "ghost", "content": "orphan before any call"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("c1", "read_file", '{"path": "a.txt"'),  # cut off when stored
                _call("c2", "get_time", ""),  # zero arguments
                _call("c3", None, "{}"),  # nameless
                _call("c4", "sleep", '{"seconds": 1}'),  # its result never came
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
        {"role": "user", "content": "also"},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},  # strayed after a user turn
        {"role": "tool", "tool_call_id": "c1", "content": "A again"},
        {"role": "tool", "tool_call_id": "c3", "content": "result of the nameless call"},
        {"role": "assistant", "content": "done"},
    ]
    original = json.dumps(messages)
    repaired, changes = repair_history(messages, "openai_chat")
    assert json.dumps(messages) == original  # the input is left alone
    for message in repaired:
        TypeAdapter(ChatCompletionMessageParam).validate_python(message)
    calls = repaired[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["c1", "c2", "c4"]
    assert [c["function"]["arguments"] for c in calls] == [
        '{"path": "a.txt"}',
        "{}",
        '{"seconds": 1}',
    ]
    results = repaired[2:5]
    assert [(m["tool_call_id"], m["content"]) for m in results] == [
        ("c1", "A"),
        ("c2", "noon"),
        ("c4", MISSING_RESULT),
    ]
    assert repaired[5:] == [{"role": "user", "content": "also"}, messages[-1]]
    assert sorted((c.action, c.call_id) for c in changes) == [
        ("added_missing_result", "c4"),
        ("dropped_duplicate_result", "c1"),
        ("dropped_orphan_result", "c3"),
        ("dropped_orphan_result", "ghost"),
        ("filled_empty_arguments", "c2"),
        ("moved_result", "c1"),
        ("removed_nameless_call", "c3"),
        ("repaired_arguments", "c1"),
    ]
    assert repair_history(repaired, "openai_chat") == (repaired, [])  # idempotent


def test_openai_chat_assistant_left_without_calls_is_dropped() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [_call("x", "", "{}")]},
        {"role": "tool", "tool_call_id": "x", "content": "r"},
    ]
    repaired, changes = repair_history(messages, "openai_chat")
    assert repaired == [{"role": "user", "content": "hi"}]
    assert {c.action for c in changes} == {
        "removed_nameless_call",
        "dropped_empty_message",
        "dropped_orphan_result",
    }


def test_openai_responses_history() -> None:
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call_output", "call_id": "early", "output": "orphan"},
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "grep", "arguments": "{"},
        {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": ""},
        {"type": "function_call", "call_id": "c3", "name": "", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "noon"},
        {"type": "function_call_output", "call_id": "c2", "output": "noon twice"},
        {"role": "user", "content": "next"},
    ]
    repaired, changes = repair_history(items, "openai_responses")
    for item in repaired:
        TypeAdapter(ResponseInputItemParam).validate_python(item)
    assert [(i.get("type"), i.get("call_id")) for i in repaired] == [
        (None, None),
        ("function_call", "c1"),
        ("function_call", "c2"),
        ("function_call_output", "c2"),
        ("function_call_output", "c1"),
        (None, None),
    ]
    assert repaired[1]["arguments"] == "{}" and repaired[1]["id"] == "fc_1"
    assert repaired[2]["arguments"] == "{}"
    assert repaired[4]["output"] == MISSING_RESULT
    assert {c.action for c in changes} == {
        "dropped_orphan_result",
        "repaired_arguments",
        "filled_empty_arguments",
        "removed_nameless_call",
        "dropped_duplicate_result",
        "added_missing_result",
    }


def test_anthropic_history() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Working."},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": '{"path": "a"'},
                {"type": "tool_use", "id": "t2", "name": "get_time", "input": None},
                {"type": "tool_use", "id": "t3", "name": "", "input": {}},
            ],
        },
        {"role": "user", "content": "did you finish?"},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "noon"},
                {"type": "tool_result", "tool_use_id": "t3", "content": "nameless"},
            ],
        },
        {"role": "assistant", "content": "Done."},
    ]
    repaired, changes = repair_history(messages, "anthropic")
    for message in repaired:
        TypeAdapter(anthropic.types.MessageParam).validate_python(message)
    uses = [b for b in repaired[1]["content"] if b["type"] == "tool_use"]
    assert [(u["id"], u["input"]) for u in uses] == [("t1", {"path": "a"}), ("t2", {})]
    reply = repaired[2]["content"]
    assert [b.get("tool_use_id") for b in reply] == ["t1", "t2", None]
    assert reply[0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": MISSING_RESULT,
        "is_error": True,
    }
    assert reply[2] == {"type": "text", "text": "did you finish?"}
    assert [m["role"] for m in repaired] == ["user", "assistant", "user", "assistant"]
    assert sorted((c.action, c.call_id) for c in changes) == [
        ("added_missing_result", "t1"),
        ("dropped_empty_message", None),
        ("dropped_orphan_result", "t3"),
        ("filled_empty_arguments", "t2"),
        ("moved_result", "t2"),
        ("removed_nameless_call", "t3"),
        ("repaired_arguments", "t1"),
    ]


def test_unknown_format_is_refused() -> None:
    with pytest.raises(
        FormatError,
        match="one of anthropic, bedrock, gemini, ollama, openai_chat, openai_responses",
    ):
        repair_history([], "cohere")


def test_responses_history_with_ids_reused_across_turns() -> None:
    """Kimi-style ids repeat every turn: each output answers the latest waiting call."""
    call_id = "functions.get_weather:0"

    def call(city: str) -> dict[str, Any]:
        arguments = json.dumps({"city": city})
        return {
            "type": "function_call",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": arguments,
        }

    def output(text: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": call_id, "output": text}

    items = [call("Paris"), output("sunny"), call("Rome"), output("rainy"), call("Oslo")]
    repaired, changes = repair_history(items, "openai_responses")
    outputs = [item.get("output") for item in repaired if item["type"] == "function_call_output"]
    assert outputs[:2] == ["sunny", "rainy"]  # the second turn's real output is kept
    assert len(outputs) == 3 and outputs[2] != "rainy"  # Oslo gets a synthetic error
    assert [c.action for c in changes] == ["added_missing_result"]
