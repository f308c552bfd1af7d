"""repair_history for Gemini, Ollama and Bedrock: the same rules in their shapes."""

from __future__ import annotations

import json
from typing import Any

import ollama
import pytest
from google.genai import types

from toolbridge.formats.history import MISSING_RESULT, repair_history
from toolbridge.formats.types import HistoryChange


def _repair(messages: list[dict[str, Any]], format: str) -> tuple[Any, list[HistoryChange]]:
    """Repair, checking that the input is left alone and that a second run changes nothing."""
    original = json.dumps(messages)
    repaired, changes = repair_history(messages, format)
    assert json.dumps(messages) == original
    assert repair_history(repaired, format) == (repaired, [])
    return repaired, changes


def _actions(changes: list[HistoryChange]) -> list[tuple[str, str | None]]:
    return sorted((c.action, c.call_id) for c in changes)


# --- Gemini ------------------------------------------------------------------------------


def _fc(name: str | None, args: Any = None, **extra: Any) -> dict[str, Any]:
    call = {"name": name, **extra} if args is None else {"name": name, "args": args, **extra}
    return {"functionCall": call}


def _fr(name: str, output: str, **extra: Any) -> dict[str, Any]:
    return {"functionResponse": {**extra, "name": name, "response": {"output": output}}}


def test_gemini_history_without_ids_matches_by_name_in_order() -> None:
    contents = [
        {"role": "user", "parts": [_fr("ghost", "before any call")]},
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Working."},
                _fc("read_file", '{"path": "a"'),  # cut off when stored
                _fc("get_time"),  # zero arguments, twice
                _fc("get_time"),
                _fc(""),  # nameless
                {**_fc("sleep", {"seconds": 1}), "thoughtSignature": "c2ln"},  # never answered
            ],
        },
        {
            "role": "user",
            "parts": [
                _fr("get_time", "noon"),
                _fr("read_file", "A"),
                _fr("get_time", "one past noon"),
                _fr("get_time", "a third answer"),
                _fr("", "the nameless call's"),
            ],
        },
        {"role": "model", "parts": [{"text": "Done."}]},
    ]
    repaired, changes = _repair(contents, "gemini")
    for content in repaired:
        types.Content.model_validate(content)
    assert [c["role"] for c in repaired] == ["user", "model", "user", "model"]
    calls = [p["functionCall"] for p in repaired[1]["parts"] if "functionCall" in p]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("read_file", {"path": "a"}),
        ("get_time", {}),
        ("get_time", {}),
        ("sleep", {"seconds": 1}),
    ]
    assert repaired[1]["parts"][-1]["thoughtSignature"] == "c2ln"
    responses = [p["functionResponse"] for p in repaired[2]["parts"]]
    assert responses == [
        {"name": "read_file", "response": {"output": "A"}},
        {"name": "get_time", "response": {"output": "noon"}},
        {"name": "get_time", "response": {"output": "one past noon"}},
        {"name": "sleep", "response": {"error": MISSING_RESULT}},  # no id: none is made up
    ]
    assert _actions(changes) == [
        ("added_missing_result", None),
        ("dropped_duplicate_result", None),
        ("dropped_empty_message", None),
        ("dropped_orphan_result", None),
        ("dropped_orphan_result", None),
        ("filled_empty_arguments", None),
        ("filled_empty_arguments", None),
        ("removed_nameless_call", None),
        ("repaired_arguments", None),
    ]


def test_gemini_history_with_ids_matches_by_id() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {
            "role": "model",
            "parts": [
                _fc("weather", {"city": "Paris"}, id="w1"),
                _fc("weather", {"city": "Rome"}, id="w2"),
                _fc("weather", ["Oslo"], id="w3"),  # not an object
            ],
        },
        {"role": "user", "parts": [{"text": "quick"}]},
        {
            "role": "user",
            "parts": [
                _fr("weather", "rainy", id="w2"),
                _fr("weather", "sunny", id="w1"),
                _fr("weather", "cold", id="w9"),
            ],
        },
    ]
    repaired, changes = _repair(contents, "gemini")
    for content in repaired:
        types.Content.model_validate(content)
    assert repaired[1]["parts"][2]["functionCall"]["args"] == {}
    answers = [p["functionResponse"] for p in repaired[2]["parts"][:3]]
    assert [(a["id"], a["response"]) for a in answers] == [
        ("w1", {"output": "sunny"}),
        ("w2", {"output": "rainy"}),
        ("w3", {"error": MISSING_RESULT}),
    ]
    assert repaired[2]["parts"][3:] == [{"text": "quick"}]  # the reply's own text follows
    assert len(repaired) == 3
    assert _actions(changes) == [
        ("added_missing_result", "w3"),
        ("dropped_empty_message", None),  # its results moved up into the first reply
        ("dropped_orphan_result", "w9"),
        ("moved_result", "w1"),
        ("moved_result", "w2"),
        ("repaired_arguments", "w3"),
    ]


# --- Ollama ------------------------------------------------------------------------------


def _oc(name: str | None, arguments: Any = None) -> dict[str, Any]:
    function = {"name": name} if arguments is None else {"name": name, "arguments": arguments}
    return {"function": function}


def _tool(name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_name": name}


def test_ollama_history() -> None:
    messages = [
        _tool("ghost", "before any call"),
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                _oc("read_file", '{"path": "a"'),  # text, cut off
                _oc("get_time"),  # zero arguments
                _oc("list_dir", '{"path": "."}'),  # text, valid: sent as an object
                _oc(None, {}),  # nameless
                _oc("sleep", {"seconds": 1}),  # never answered
            ],
        },
        _tool("get_time", "noon"),
        _tool("read_file", "A"),
        _tool("read_file", "A again"),
        _tool("list_dir", "a.txt"),
        _tool("stat", "no such call"),
        {"role": "assistant", "content": "done"},
    ]
    repaired, changes = _repair(messages, "ollama")
    for message in repaired:
        ollama.Message.model_validate(message)
    calls = [c["function"] for c in repaired[1]["tool_calls"]]
    assert calls == [
        {"name": "read_file", "arguments": {"path": "a"}},
        {"name": "get_time", "arguments": {}},
        {"name": "list_dir", "arguments": {"path": "."}},
        {"name": "sleep", "arguments": {"seconds": 1}},
    ]
    assert repaired[2:6] == [
        _tool("read_file", "A"),
        _tool("get_time", "noon"),
        _tool("list_dir", "a.txt"),
        _tool("sleep", MISSING_RESULT),
    ]
    assert repaired[0] == messages[1] and repaired[6:] == [messages[-1]]
    assert [c.action for c in sorted(changes, key=lambda c: c.action)] == [
        "added_missing_result",
        "dropped_duplicate_result",
        "dropped_orphan_result",
        "dropped_orphan_result",
        "filled_empty_arguments",
        "removed_nameless_call",
        "repaired_arguments",
        "repaired_arguments",
    ]


def test_ollama_result_after_a_user_turn_is_moved_back() -> None:
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [_oc("get_time", {})]},
        {"role": "user", "content": "well?"},
        _tool("get_time", "noon"),
    ]
    repaired, changes = _repair(messages, "ollama")
    assert repaired == [messages[0], messages[2], messages[1]]
    assert [c.action for c in changes] == ["moved_result"]


# --- Bedrock -----------------------------------------------------------------------------


def _use(tool_use_id: str | None, name: str | None, tool_input: Any = None) -> dict[str, Any]:
    use = {"toolUseId": tool_use_id, "name": name}
    return {"toolUse": use if tool_input is None else {**use, "input": tool_input}}


def _result(tool_use_id: str, text: str, status: str = "success") -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "content": [{"text": text}], "status": status}}


def test_bedrock_history() -> None:
    messages = [
        {"role": "user", "content": [_result("ghost", "before any call"), {"text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Working."},
                _use("t1", "read_file", '{"path": "a"'),  # stored as text, cut off
                _use("t2", "get_time"),  # zero arguments
                _use("t3", "", {}),  # nameless
                _use("t4", "sleep", [1]),  # not an object; never answered
            ],
        },
        {
            "role": "user",
            "content": [
                _result("t2", "noon"),
                _result("t2", "noon again"),
                _result("t3", "nameless"),
                {"text": "and?"},
            ],
        },
        {"role": "assistant", "content": [{"text": "Done."}]},
    ]
    repaired, changes = _repair(messages, "bedrock")
    assert [m["role"] for m in repaired] == ["user", "assistant", "user", "assistant"]
    assert repaired[0] == {"role": "user", "content": [{"text": "go"}]}
    uses = [b["toolUse"] for b in repaired[1]["content"] if "toolUse" in b]
    assert [(u["toolUseId"], u["input"]) for u in uses] == [
        ("t1", {"path": "a"}),
        ("t2", {}),
        ("t4", {}),
    ]
    missing = [{"text": MISSING_RESULT}]
    assert repaired[2]["content"] == [
        {"toolResult": {"toolUseId": "t1", "content": missing, "status": "error"}},
        _result("t2", "noon"),
        {"toolResult": {"toolUseId": "t4", "content": missing, "status": "error"}},
        {"text": "and?"},
    ]
    assert _actions(changes) == [
        ("added_missing_result", "t1"),
        ("added_missing_result", "t4"),
        ("dropped_duplicate_result", "t2"),
        ("dropped_orphan_result", "ghost"),
        ("dropped_orphan_result", "t3"),
        ("filled_empty_arguments", "t2"),
        ("removed_nameless_call", "t3"),
        ("repaired_arguments", "t1"),
        ("repaired_arguments", "t4"),
    ]


def test_bedrock_call_without_id_gets_one_and_its_result() -> None:
    messages = [{"role": "assistant", "content": [_use(None, "get_time", {})]}]
    repaired, changes = _repair(messages, "bedrock")
    call_id = repaired[0]["content"][0]["toolUse"]["toolUseId"]
    assert call_id.startswith("call_")
    assert repaired[1]["content"][0]["toolResult"]["toolUseId"] == call_id
    assert [c.action for c in changes] == ["added_call_id", "added_missing_result"]


# --- all three: a turn whose only call is nameless -----------------------------------------


@pytest.mark.parametrize(
    ("format", "messages"),
    [
        (
            "gemini",
            [
                {"role": "model", "parts": [_fc(None, {})]},
                {"role": "user", "parts": [_fr("x", "r")]},
            ],
        ),
        (
            "ollama",
            [
                {"role": "assistant", "content": "", "tool_calls": [_oc("", {})]},
                _tool("x", "r"),
            ],
        ),
        (
            "bedrock",
            [
                {"role": "assistant", "content": [_use("x", None, {})]},
                {"role": "user", "content": [_result("x", "r")]},
            ],
        ),
    ],
)
def test_turn_left_without_calls_is_dropped(format: str, messages: list[dict[str, Any]]) -> None:
    repaired, changes = _repair(messages, format)
    assert repaired == []
    assert {c.action for c in changes} == {
        "removed_nameless_call",
        "dropped_empty_message",
        "dropped_orphan_result",
    }
