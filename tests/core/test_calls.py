"""What the model sent: strict decoding for execution, lenient repair only for replay."""

from __future__ import annotations

from typing import Any

import pytest

from toolbridge import (
    ToolCallRequest,
    decode_arguments,
    parse_tool_arguments,
    repair_arguments_for_replay,
)
from toolbridge.core.calls import ArgumentsDecodeError, format_path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, {}),
        ("", {}),
        ("  \n", {}),
        ('{"a": 1}', {"a": 1}),
        ({"a": 1}, {"a": 1}),
    ],
)
def test_parse_tool_arguments_normalises_empty_and_object_text(raw: Any, expected: Any) -> None:
    assert parse_tool_arguments(raw) == expected


@pytest.mark.parametrize("raw", ["[]", "42", '"text"', "not json", '{"a": 1} x', '{"a": 1', [1], 7])
def test_parse_tool_arguments_keeps_everything_else_for_the_registry(raw: Any) -> None:
    assert parse_tool_arguments(raw) is raw


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"a": NaN}', "NaN is not valid JSON"),
        ('{"a": -Infinity}', "-Infinity is not valid JSON"),
        ('{"a": 1e400}', "too large for a float"),
        ('{"a": 1} {"b": 2}', "extra text after the JSON value"),
        ('{"a": "unterminated', "cut off"),
        ('{"a": [1, 2', "cut off"),
        ("[" * 5000, "nested too deeply"),
        ("{'a': 1}", "line 1 column 2"),
    ],
)
def test_decode_arguments_refuses_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(ArgumentsDecodeError) as caught:
        decode_arguments(text)
    assert reason in str(caught.value)


def test_replay_repair_is_lenient_and_separate_from_execution() -> None:
    assert repair_arguments_for_replay('{"path": "a.txt"') == {"path": "a.txt"}
    assert repair_arguments_for_replay('{"a": 1}') == {"a": 1}
    assert repair_arguments_for_replay("[1, 2]") == {}
    assert repair_arguments_for_replay(None) == {}
    assert repair_arguments_for_replay(42) == {}
    # the execution path never repairs: the same text stays an error there
    with pytest.raises(ArgumentsDecodeError):
        decode_arguments('{"path": "a.txt"')


def test_tool_call_request_keeps_raw_arguments_and_provider_extras() -> None:
    call = ToolCallRequest("functions.read_file:3", "read_file", '{"a": 1}', {"sig": "x"})
    assert call.arguments == '{"a": 1}' and call.extra == {"sig": "x"}


def test_format_path() -> None:
    assert format_path([]) == "$"
    assert format_path(["a", 0, "b c", "x" * 70]) == (
        '$.a[0]["b c"]["' + "x" * 40 + "…" + "x" * 10 + '"]'
    )
