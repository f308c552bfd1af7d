"""The assembler mechanism and the adapters' edge cases, plus the split property test."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbridge.formats import FormatError
from toolbridge.formats.streaming import (
    AnthropicStream,
    OpenAIChatStream,
    ToolCallAssembler,
    assemble,
    stream_adapter,
)


def _chat(
    tool_call: dict[str, Any], *, finish: str | None = None, index: int = 0
) -> dict[str, Any]:
    delta = {"tool_calls": [tool_call]} if tool_call else {}
    return {"choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


# --- the split property: any split of the argument text assembles to the same call ----

EventsBuilder = Callable[[list[str]], list[dict[str, Any]]]


def _openai_chat_events(fragments: list[str]) -> list[dict[str, Any]]:
    events = [_chat({"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}})]
    events += [_chat({"index": 0, "function": {"arguments": f}}) for f in fragments]
    return [*events, _chat({}, finish="tool_calls")]


def _responses_events(fragments: list[str]) -> list[dict[str, Any]]:
    item = {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": item}
    ]
    events += [
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc",
            "delta": f,
        }
        for f in fragments
    ]
    return [*events, {"type": "response.completed", "response": {"status": "completed"}}]


def _anthropic_events(fragments: list[str]) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "c1", "name": "f", "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "content_block_start", "index": 0, "content_block": block}
    ]
    events += [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": f},
        }
        for f in fragments
    ]
    return [*events, {"type": "content_block_stop", "index": 0}, {"type": "message_stop"}]


def _bedrock_events(fragments: list[str]) -> list[dict[str, Any]]:
    start = {"start": {"toolUse": {"toolUseId": "c1", "name": "f"}}, "contentBlockIndex": 0}
    events: list[dict[str, Any]] = [{"contentBlockStart": start}]
    events += [
        {"contentBlockDelta": {"delta": {"toolUse": {"input": f}}, "contentBlockIndex": 0}}
        for f in fragments
    ]
    return [*events, {"contentBlockStop": {"contentBlockIndex": 0}}]


BUILDERS: dict[str, EventsBuilder] = {
    "openai_chat": _openai_chat_events,
    "openai_responses": _responses_events,
    "anthropic": _anthropic_events,
    "bedrock": _bedrock_events,
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _utf16_units(text: str) -> list[str]:
    """The text as UTF-16 code units, so a cut can fall between two surrogate halves."""
    raw = text.encode("utf-16-le")
    return [raw[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(raw), 2)]


def _decoded(units: list[str]) -> str:
    """A fragment as a JSON decoder yields it: halves of one pair inside it are joined."""
    return "".join(units).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    ensure_ascii=st.booleans(),
    data=st.data(),
)
def test_any_split_of_the_argument_text_assembles_to_the_same_call(
    arguments: dict[str, Any], ensure_ascii: bool, data: st.DataObject
) -> None:
    text = json.dumps(arguments, ensure_ascii=ensure_ascii)
    units = _utf16_units(text)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(units)), max_size=25)))
    fragments = [_decoded(units[a:b]) for a, b in pairwise([0, *cuts, len(units)])]
    for format_name, build in BUILDERS.items():
        (call,) = assemble(format_name, build(fragments)).calls
        assert (call.id, call.name) == ("c1", "f"), format_name
        assert call.arguments == text, format_name
        assert json.loads(call.arguments) == arguments, format_name


# --- the general mechanism ---------------------------------------------------------------


def test_opening_a_key_again_finishes_the_call_under_it() -> None:
    assembler = ToolCallAssembler()
    assert assembler.open(0, call_id="a", name="f") == []
    assembler.add_arguments(0, '{"x": 1}')
    (finished,) = assembler.open(0, call_id="b", name="g")
    assert (finished.id, finished.name, finished.arguments) == ("a", "f", '{"x": 1}')
    assert assembler.is_open(0)
    assert [c.id for c in assembler.result().calls] == ["a", "b"]


def test_appending_to_a_call_that_was_never_opened_says_how_to_fix_it() -> None:
    assembler = ToolCallAssembler()
    with pytest.raises(KeyError, match=r"open\(\) it first"):
        assembler.add_arguments("nope", "{}")
    with pytest.raises(KeyError, match="no open tool call"):
        assembler.finish("nope")


def test_result_lists_calls_in_start_order_even_when_they_finish_out_of_order() -> None:
    assembler = ToolCallAssembler()
    assembler.open("first", call_id="1", name="f")
    assembler.open("second", call_id="2", name="f")
    assembler.finish("second")
    assert [c.id for c in assembler.result().calls] == ["1", "2"]


def test_preview_shows_partial_arguments_on_request_without_changing_the_result() -> None:
    stream = AnthropicStream()
    block = {"type": "tool_use", "id": "t1", "name": "write", "input": {}}
    stream.feed({"type": "content_block_start", "index": 0, "content_block": block})
    assert stream.preview(0) is None
    pieces = ['{"path": "a.txt", "body": "hel', "lo \ud83d", '\ude00", "n": 1', "2}"]
    previews = []
    for piece in pieces:
        delta = {"type": "input_json_delta", "partial_json": piece}
        stream.feed({"type": "content_block_delta", "index": 0, "delta": delta})
        previews.append(stream.preview(0))
    assert previews[0] == {"path": "a.txt", "body": "hel"}
    assert previews[1] == {"path": "a.txt", "body": "hello "}  # half a pair is held back
    assert previews[2] == {"path": "a.txt", "body": "hello 😀", "n": 1}
    (call,) = stream.feed({"type": "content_block_stop", "index": 0})
    assert json.loads(call.arguments) == {"path": "a.txt", "body": "hello 😀", "n": 12}


def test_preview_of_text_that_cannot_become_json_raises() -> None:
    assembler = ToolCallAssembler()
    assembler.open(0, name="f")
    assembler.add_arguments(0, '{"a": nope')
    with pytest.raises(ValueError):
        assembler.preview(0)


def test_generated_ids_are_stable_unique_and_salted() -> None:
    chunk = {"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "now", "args": {}}},
        {"functionCall": {"name": "now", "args": {}}},
    ]}, "finishReason": "STOP"}]}  # fmt: skip
    first = assemble("gemini", [chunk]).calls
    again = assemble("gemini", [chunk]).calls
    salted = assemble("gemini", [chunk], id_salt="turn-2").calls
    assert [c.id for c in first] == [c.id for c in again]
    assert first[0].id != first[1].id
    assert {c.id for c in salted}.isdisjoint({c.id for c in first})
    assert all(c.extra["generated_id"] is True for c in first)


# --- adapter edge cases -------------------------------------------------------------------


def test_openai_name_resent_in_every_fragment_is_not_doubled_and_split_names_join() -> None:
    repeated = [
        _chat({"index": 0, "id": "a", "function": {"name": "read_file", "arguments": '{"p'}}),
        _chat({"index": 0, "function": {"name": "read_file", "arguments": '": 1}'}}),
    ]
    split = [
        _chat({"index": 0, "id": "a", "function": {"name": "read_"}}),
        _chat({"index": 0, "function": {"name": "file", "arguments": "{}"}}),
    ]
    assert assemble("openai_chat", repeated).calls[0].name == "read_file"
    assert assemble("openai_chat", split).calls[0].name == "read_file"


def test_openai_other_choices_are_not_mixed_in() -> None:
    stream = OpenAIChatStream(choice=1)
    stream.feed({"choices": [{"index": 0, "delta": {"content": "zero"}}]})
    stream.feed({"choices": [{"index": 1, "delta": {"content": "one"}}]})
    assert stream.result().text == "one"


def test_openai_stream_without_finish_reason_still_yields_its_calls_on_close() -> None:
    stream = OpenAIChatStream()
    assert stream.feed(_chat({"index": 0, "id": "a", "function": {"name": "f"}})) == []
    (call,) = stream.close()
    assert (call.id, call.arguments) == ("a", "")
    assert stream.result().finish_reason is None


def test_anthropic_input_sent_whole_in_the_block_start_is_kept() -> None:
    block = {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}
    events = [
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_stop", "index": 0},
    ]
    assert assemble("anthropic", events).calls[0].arguments == {"a": 1}


def test_gemini_sdk_style_snake_case_dicts_are_read_too() -> None:
    chunk = {"candidates": [{"content": {"parts": [
        {"function_call": {"id": "g1", "name": "f", "args": {"a": 1}}, "thought_signature": "c2ln"},
    ]}, "finish_reason": "STOP"}]}  # fmt: skip
    (call,) = assemble("gemini", [chunk]).calls
    assert (call.id, call.arguments, dict(call.extra)) == (
        "g1",
        {"a": 1},
        {"thought_signature": "c2ln"},
    )


def test_unknown_format_and_unreadable_events_are_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown stream format 'openai'.*openai_chat"):
        stream_adapter("openai")
    with pytest.raises(FormatError, match="expected a stream event as a dict"):
        OpenAIChatStream().feed(["not", "an", "event"])
