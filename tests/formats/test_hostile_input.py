# ruff: noqa: E501  (one wire case per line reads better than wrapped ones)
"""Issue 15: every provider entry point raises only `FormatError` on wrong-typed wire data.

Each case is a minimal example of a class the fuzz run found (a list as finish reason,
``null`` where an object belongs, a number where text belongs, deep nesting, a
non-string call id); the error names the JSON path of the field that is off.
"""

from __future__ import annotations

import copy
import json
from types import ModuleType
from typing import Any

import pytest

from toolbridge.formats import (
    FormatError,
    anthropic,
    assemble,
    bedrock,
    gemini,
    ollama,
    openai_chat,
    openai_responses,
    repair_history,
)

DEEP = "[" * 2000 + "]" * 2000


def _chat(**choice: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": "hi"}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop", **choice}]}


# One realistic payload per provider and a path into it whose value gets replaced.
PAYLOADS: dict[str, tuple[ModuleType, dict[str, Any]]] = {
    "openai_chat": (openai_chat, _chat()),
    "openai_responses": (
        openai_responses,
        {
            "object": "response",
            "status": "completed",
            "output": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
        },
    ),
    "anthropic": (
        anthropic,
        {
            "type": "message",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            "stop_reason": "tool_use",
        },
    ),
    "gemini": (
        gemini,
        {
            "candidates": [
                {"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}, "finishReason": "STOP"}
            ]
        },
    ),
    "ollama": (
        ollama,
        {
            "message": {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
            "done": True,
            "done_reason": "stop",
        },
    ),
    "bedrock": (
        bedrock,
        {
            "output": {"message": {"content": [{"toolUse": {"toolUseId": "b1", "name": "f", "input": {}}}]}},
            "stopReason": "tool_use",
        },
    ),
}  # fmt: skip

FINISH_PATHS = {
    "openai_chat": ("choices", 0, "finish_reason"),
    "openai_responses": ("status",),
    "anthropic": ("stop_reason",),
    "gemini": ("candidates", 0, "finishReason"),
    "ollama": ("done_reason",),
    "bedrock": ("stopReason",),
}


def _replaced(payload: Any, path: tuple[Any, ...], value: Any) -> Any:
    data = copy.deepcopy(payload)
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize("provider", sorted(PAYLOADS))
def test_a_list_as_finish_reason_is_a_format_error_naming_the_field(provider: str) -> None:
    module, payload = PAYLOADS[provider]
    module.parse_response(payload)  # the payload itself is fine
    path = FINISH_PATHS[provider]
    with pytest.raises(FormatError, match=f"{path[-1]} must be a string, got an array"):
        module.parse_response(_replaced(payload, path, ["stop"]))


@pytest.mark.parametrize(
    ("provider", "path", "value", "message"),
    [
        ("gemini", ("candidates",), [None], r"candidates\[0\] must be an object, got null"),
        ("gemini", ("candidates", 0, "content", "parts"), 5, "parts must be an array"),
        ("gemini", ("candidates", 0, "content", "parts", 0), {"text": 5}, "text must be a string"),
        ("openai_chat", ("choices", 0, "message", "content"), 5, "content must be a string"),
        ("openai_chat", ("choices",), [None], r"choices\[0\] must be an object, got null"),
        ("openai_chat", ("choices", 0, "message", "tool_calls"), [{"id": "a", "function": 3}], "function must be an object"),
        ("anthropic", ("content", 0, "name"), 5, "name must be a string, got a number"),
        ("anthropic", ("content",), [{"type": "text", "text": ["a"]}], "text must be a string"),
        ("openai_responses", ("output", 0, "name"), {}, "name must be a string, got an object"),
        ("ollama", ("message", "tool_calls"), [None], r"tool_calls\[0\] must be an object"),
        ("ollama", ("message", "content"), 7, "content must be a string"),
        ("bedrock", ("output", "message", "content", 0, "toolUse"), [], "toolUse must be an object"),
    ],
)  # fmt: skip
def test_wrong_typed_fields_are_format_errors(
    provider: str, path: tuple[Any, ...], value: Any, message: str
) -> None:
    module, payload = PAYLOADS[provider]
    with pytest.raises(FormatError, match=message):
        module.parse_response(_replaced(payload, path, value))


@pytest.mark.parametrize("provider", sorted(PAYLOADS))
def test_deep_nesting_is_a_format_error_as_text_and_as_dict(provider: str) -> None:
    module, _ = PAYLOADS[provider]
    with pytest.raises(FormatError, match="nested deeper"):
        module.parse_response('{"a": ' + DEEP + "}")
    deep: Any = {}
    for _ in range(2000):
        deep = {"a": deep}
    with pytest.raises(FormatError, match="nested deeper than 256 levels"):
        module.parse_response({"x": deep})


@pytest.mark.parametrize("provider", sorted(PAYLOADS))
def test_a_numeric_call_id_is_refused_not_passed_on(provider: str) -> None:
    module, payload = PAYLOADS[provider]
    path = {
        "openai_chat": ("choices", 0, "message", "tool_calls"),
        "openai_responses": ("output", 0, "call_id"),
        "anthropic": ("content", 0, "id"),
        "gemini": ("candidates", 0, "content", "parts", 0, "functionCall", "id"),
        "ollama": ("message", "tool_calls", 0, "id"),
        "bedrock": ("output", "message", "content", 0, "toolUse", "toolUseId"),
    }[provider]
    value: Any = 1
    if provider == "openai_chat":
        value = [{"id": 1, "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    with pytest.raises(FormatError, match="must be a string, got a number"):
        module.parse_response(_replaced(payload, path, value))


@pytest.mark.parametrize("provider", sorted(PAYLOADS))
@pytest.mark.parametrize("tools", [[None], [{"functionDeclarations": [None]}], None, 5, "x"])
def test_parse_definitions_refuses_junk_with_a_format_error(provider: str, tools: Any) -> None:
    module, _ = PAYLOADS[provider]
    with pytest.raises(FormatError):
        module.parse_definitions(tools)


def test_a_gemini_declaration_that_is_null_is_named() -> None:
    with pytest.raises(FormatError, match=r"functionDeclarations\[0\] must be an object"):
        gemini.parse_definitions([{"functionDeclarations": [None]}])


STREAM_CASES = [
    ("openai_chat", [{"choices": [None]}], r"choices\[0\] must be an object, got null"),
    ("openai_chat", [{"choices": [{"delta": {"content": 5}}]}], "content must be a string"),
    (
        "openai_chat",
        [{"choices": [{"delta": {"tool_calls": [{"index": [0], "id": "a"}]}}]}],
        "index must be an integer, got an array",
    ),
    (
        "openai_chat",
        [{"choices": [{"delta": {"tool_calls": [{"index": 0, "id": 1}]}}]}],
        "id must be a string, got a number",
    ),
    ("anthropic", [{"type": "content_block_start", "index": [0], "content_block": {}}], "index"),
    (
        "anthropic",
        [{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": 1}}],
        "id must be a string",
    ),
    ("anthropic", [{"type": "content_block_delta", "index": 0, "delta": 5}], "delta must be an object"),
    ("gemini", [{"candidates": [None]}], "must be an object, got null"),
    ("gemini", [{"candidates": [{"content": {"parts": 5}}]}], "parts must be an array"),
    ("gemini", [{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "id": 1}}]}}]}], "id must be a string"),
    ("ollama", [{"message": {"tool_calls": [{"id": 1, "function": {"name": "f"}}]}}], "id must be a string"),
    ("ollama", [{"message": {"content": ["a"]}}], "content must be a string"),
    ("bedrock", [{"contentBlockStart": {"contentBlockIndex": [1], "start": {}}}], "contentBlockIndex"),
    ("bedrock", [{"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": 1}}}}], "toolUseId must be a string"),
    ("openai_responses", [{"type": "response.output_item.added", "item": {"type": "function_call", "call_id": 1}}], "call_id must be a string"),
    ("openai_responses", [{"type": "response.output_text.delta", "delta": 5}], "delta must be a string"),
    ("openai_chat", [["not", "an", "event"]], "expected a stream event"),
    ("openai_chat", ['{"a": ' + DEEP + "}"], "nested deeper"),
]  # fmt: skip


@pytest.mark.parametrize(("provider", "events", "message"), STREAM_CASES)
def test_stream_adapters_raise_only_format_errors(
    provider: str, events: list[Any], message: str
) -> None:
    with pytest.raises(FormatError, match=message):
        assemble(provider, events)


def test_history_with_an_unhashable_call_id_is_repaired() -> None:
    history = [
        {"role": "assistant", "tool_calls": [{"id": ["x"], "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": ["x"], "content": "r"},
    ]
    before = json.dumps(history)
    repaired, changes = repair_history(history, "openai_chat")
    assert json.dumps(history) == before
    assert [c.action for c in changes] == [
        "added_call_id",
        "filled_empty_arguments",
        "dropped_orphan_result",
        "added_missing_result",
    ]
    assert isinstance(repaired[0]["tool_calls"][0]["id"], str)
    items = [
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": {"a": 1}, "output": "x"},
    ]
    _, changes = repair_history(items, "openai_responses")
    assert [c.action for c in changes] == ["dropped_orphan_result", "added_missing_result"]


def test_history_shapes_that_cannot_be_repaired_are_format_errors() -> None:
    with pytest.raises(FormatError, match=r"messages\[0\].tool_calls must be an array"):
        repair_history([{"role": "assistant", "tool_calls": 5}], "openai_chat")
    deep: Any = {"role": "user", "content": "x"}
    for _ in range(600):
        deep = {"content": [deep]}
    with pytest.raises(FormatError, match="nested deeper"):
        repair_history([deep], "anthropic")
    with pytest.raises(FormatError, match="must be a list of messages"):
        repair_history({"role": "user"}, "openai_chat")  # type: ignore[arg-type]
