"""Saved run states edited by hand or by another tool: `RunState.from_json` refuses every
malformed one with a ValueError saying what is off (its contract), never a TypeError,
KeyError or AttributeError from deep inside; and the CLI says so in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from toolbridge.agent import AssistantMessage, RunState, UserMessage
from toolbridge.core.calls import ToolCallRequest
from toolbridge.execution.approval import arguments_digest


def saved() -> dict[str, Any]:
    call = ToolCallRequest("c1", "write_file", '{"path": "a.txt"}')
    state = RunState([UserMessage("hi"), AssistantMessage(calls=(call,))])
    data = json.loads(json.dumps(state.to_json()))
    data["pending"] = [
        {
            "call_id": "c1",
            "tool_name": "write_file",
            "arguments": {"path": "a.txt"},
            "digest": arguments_digest("write_file", {"path": "a.txt"}),
            "retry": False,
        }
    ]
    return data


def edit(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data.__setitem__(key, value)


def edit_pending(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["pending"][0].__setitem__(key, value)


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "conversation null": edit("conversation", None),
    "conversation missing": lambda data: data.pop("conversation"),
    "conversation an object": edit("conversation", {"role": "user", "text": "hi"}),
    "turns null": edit("turns", None),
    "turns a list": edit("turns", [1]),
    "tool_calls an object": edit("tool_calls", {}),
    "usage a string": edit("usage", "lots"),
    "usage counts null": edit("usage", {"input_tokens": None}),
    "pending a string": edit("pending", "c1"),
    "pending item a string": edit("pending", ["c1"]),
    "pending item without call_id": lambda data: data["pending"][0].pop("call_id"),
    "pending item without digest": lambda data: data["pending"][0].pop("digest"),
    "pending arguments a list": edit_pending("arguments", ["a.txt"]),
    "settled an object": edit("settled", {"call": {}}),
}


def test_a_saved_state_loads() -> None:
    state = RunState.from_json(saved())
    assert [p.call.id for p in state.pending] == ["c1"]


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_state_is_a_clear_value_error(name: str) -> None:
    data = saved()
    EDITS[name](data)
    with pytest.raises(ValueError, match="run state") as caught:
        RunState.from_json(data)
    assert type(caught.value) is ValueError or isinstance(caught.value, json.JSONDecodeError)


@pytest.mark.parametrize("data", [{}, {"call_id": "c1", "digest": "d"}, {"approved": True}])
def test_a_stored_decision_that_lacks_a_field_is_a_value_error(data: dict[str, object]) -> None:
    from toolbridge.agent import ApprovalDecision

    with pytest.raises(ValueError, match="a stored decision lacks"):
        ApprovalDecision.from_json(data)


def test_a_stored_truncated_flag_must_be_a_boolean() -> None:
    from toolbridge.agent.messages import message_from_json

    stored = {"role": "assistant", "text": "", "truncated": "false"}
    with pytest.raises(ValueError, match="'truncated' must be true or false"):
        message_from_json(stored)
    assert message_from_json({"role": "assistant", "text": "x"}).truncated is False
