"""Stream shapes found in review: index only from the second fragment on, whole calls
one per chunk with neither index nor id, and streamed Responses custom tool calls."""

from __future__ import annotations

from typing import Any

from toolbridge.formats.streaming import assemble


def chunk(fragment: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {"tool_calls": [fragment]} if fragment else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_an_index_that_appears_after_the_first_fragment_continues_the_call() -> None:
    events = [
        chunk({"id": "a", "function": {"name": "f", "arguments": ""}}),
        chunk({"index": 0, "function": {"arguments": '{"x":1}'}}),
        chunk(finish="tool_calls"),
    ]
    calls = assemble("openai_chat", events).calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", '{"x":1}')]


def test_whole_calls_one_per_chunk_without_index_or_id_stay_apart() -> None:
    events = [
        chunk({"function": {"name": "f", "arguments": '{"x":1}'}}),
        chunk({"function": {"name": "g", "arguments": '{"y":2}'}}),
        chunk(finish="tool_calls"),
    ]
    calls = assemble("openai_chat", events).calls
    assert [(c.name, c.arguments) for c in calls] == [("f", '{"x":1}'), ("g", '{"y":2}')]
    assert calls[0].id != calls[1].id


def test_a_streamed_custom_tool_call_is_kept_with_its_free_form_input() -> None:
    item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "patch"}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "input": ""}},
        {
            "type": "response.custom_tool_call_input.delta",
            "output_index": 0,
            "item_id": "ctc_1",
            "delta": "*** Begin",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {**item, "input": "*** Begin"},
        },
        {"type": "response.completed", "response": {"status": "completed"}},
    ]
    (call,) = assemble("openai_responses", events).calls
    assert (call.id, call.name, call.arguments) == ("call_1", "patch", "*** Begin")
    assert call.extra["type"] == "custom" and call.extra["item_id"] == "ctc_1"
