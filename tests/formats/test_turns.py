# ruff: noqa: E501  (wire payloads read better one per line)
"""Issue 9 §1-2: `parse()` for whole responses and streams, the assistant-turn renderer
round-tripped against parse, and the wire details (no-parameter tools, Gemini's
OpenAI-compatible thought signature, Ollama's tool_call_id)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic.types as anthropic_types
import google.genai.types as genai
import ollama as ollama_sdk
import pytest
from openai.types.chat import ChatCompletionAssistantMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from toolbridge.formats import (
    NO_PARAMETERS,
    PROVIDER_FORMATS,
    FormatError,
    ParsedResponse,
    ToolSpec,
    anthropic,
    assemble,
    assistant_messages,
    bedrock,
    detect_stream_format,
    gemini,
    openai_chat,
    openai_responses,
    parse,
)

FIXTURES = Path(__file__).parent / "fixtures"
STREAMS = Path(__file__).parent.parent / "formats_stream" / "fixtures"
CASES = sorted(FIXTURES.glob("*/*.json"))
STREAM_CASES = sorted(STREAMS.glob("*/*.jsonl"))


def _payload(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))["payload"]


def _events(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _as_response(format: str, messages: list[dict[str, Any]], finish: str | None) -> Any:
    """The rendered assistant turn wrapped back into the provider's response shape."""
    if format == "openai_chat":
        return {"choices": [{"index": 0, "message": messages[0], "finish_reason": finish}]}
    if format == "openai_responses":
        return {"object": "response", "status": finish, "output": messages}
    if format == "anthropic":
        return {"type": "message", "content": messages[0]["content"], "stop_reason": finish}
    if format == "gemini":
        return {"candidates": [{"content": messages[0], "finishReason": finish}]}
    if format == "ollama":
        return {"message": messages[0], "done": True, "done_reason": finish}
    return {"output": {"message": messages[0]}, "stopReason": finish}


def _same_turn(first: ParsedResponse, second: ParsedResponse) -> None:
    """Same text, calls and parts; a generated id replayed where the provider needs one
    (OpenAI chat) comes back as the provider's own, so that flag is not compared."""

    def calls(parsed: ParsedResponse) -> list[Any]:
        return [
            (c.id, c.name, c.arguments, {k: v for k, v in c.extra.items() if k != "generated_id"})
            for c in parsed.calls
        ]

    assert second.text == first.text
    assert calls(second) == calls(first)
    assert second.parts == first.parts


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_parse_detects_and_matches_the_provider_parser(path: Path) -> None:
    format, payload = path.parent.name, _payload(path)
    expected = PROVIDER_FORMATS[format].parse_response(payload)
    assert parse(payload) == expected
    assert parse(json.dumps(payload), format) == expected


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_rendered_turn_parses_back_to_the_same_turn(path: Path) -> None:
    format, payload = path.parent.name, _payload(path)
    parsed = parse(payload)
    rendered = assistant_messages(parsed, format)
    if parsed.finish_reason == "MALFORMED_FUNCTION_CALL":  # Gemini's error text is no turn
        assert rendered == [{"role": "model", "parts": []}]
        return
    again = parse(_as_response(format, rendered, parsed.finish_reason), format)
    _same_turn(parsed, again)


@pytest.mark.parametrize("path", STREAM_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_parse_takes_stream_events_and_renders_them_like_a_whole_response(path: Path) -> None:
    format, events = path.parent.name, _events(path)
    assert detect_stream_format(events) == format
    parsed = parse(events)
    streamed = assemble(format, events)
    assert (parsed.text, parsed.calls, parsed.finish_reason) == (
        streamed.text,
        streamed.calls,
        streamed.finish_reason,
    )
    rendered = assistant_messages(parsed, format)
    again = parse(_as_response(format, rendered, parsed.finish_reason), format)
    assert again.text == parsed.text
    assert [(c.id, c.name) for c in again.calls] == [(c.id, c.name) for c in parsed.calls]


def test_openai_done_sentinel_and_sse_lines_are_accepted() -> None:
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
                    ]
                },
            }
        ]
    }
    events: list[Any] = ["data: " + json.dumps(chunk), "data: [DONE]"]
    parsed = parse(events)
    assert [(c.id, c.name, c.arguments) for c in parsed.calls] == [("c1", "f", "{}")]
    assert assemble("openai_chat", [chunk, "[DONE]"]).calls == parsed.calls
    adapter = openai_chat.OpenAIChatStream()
    adapter.feed(chunk)
    assert [c.id for c in adapter.feed("[DONE]")] == ["c1"]  # [DONE] closes the open call


def test_parse_refuses_unknown_formats_and_unrecognisable_streams() -> None:
    with pytest.raises(FormatError, match="unknown provider format 'openai'"):
        parse({}, "openai")
    with pytest.raises(FormatError, match="cannot tell which provider these stream events"):
        parse([{"hello": 1}])
    with pytest.raises(FormatError, match="cannot tell which provider this response"):
        parse({"hello": 1})


def test_gemini_array_text_is_a_stream() -> None:
    chunks = [
        {"candidates": [{"content": {"parts": [{"text": "a"}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "STOP"}]},
    ]
    assert parse(json.dumps(chunks)).text == "ab"


# --- provider-opaque items ----------------------------------------------------------------

ANTHROPIC_TURN = {
    "type": "message",
    "content": [
        {"type": "thinking", "thinking": "Let me look.", "signature": "c2lnLTE="},
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
}


def test_anthropic_thinking_and_redacted_thinking_are_replayed_exactly() -> None:
    (message,) = assistant_messages(parse(ANTHROPIC_TURN), "anthropic")
    assert message == {"role": "assistant", "content": ANTHROPIC_TURN["content"]}


def test_anthropic_streamed_thinking_is_rebuilt_with_its_signature() -> None:
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "look."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2lnLTE="}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Checking."}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}},
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]  # fmt: skip
    streamed, whole = parse(events), parse(ANTHROPIC_TURN)
    assert streamed.parts == whole.parts
    assert assistant_messages(streamed, "anthropic") == assistant_messages(whole, "anthropic")


def test_gemini_thought_signatures_on_calls_and_text_go_back_with_their_parts() -> None:
    parts = [
        {"text": "thinking about it", "thought": True},
        {"text": "Sure.", "thoughtSignature": "dGV4dA=="},
        {
            "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": "Y2FsbA==",
        },
        {"functionCall": {"name": "get_time"}},
    ]
    payload = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]
    }
    parsed = parse(payload)
    assert parsed.text == "Sure."
    assert parsed.calls[0].extra["thought_signature"] == "Y2FsbA=="
    assert gemini.assistant_messages(parsed) == [{"role": "model", "parts": parts}]


def test_responses_reasoning_items_and_item_ids_are_replayed() -> None:
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ZW5j"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"a": 1}',
            "status": "completed",
        },
    ]
    items = openai_responses.assistant_messages(
        parse({"object": "response", "status": "completed", "output": output})
    )
    assert items[0] == output[0]
    assert items[1] == {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "f",
        "arguments": '{"a": 1}',
    }
    events = [
        {"type": "response.output_item.done", "output_index": 0, "item": output[0]},
        {"type": "response.output_item.added", "output_index": 1, "item": {**output[1], "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": '{"a": 1}'},
        {"type": "response.output_item.done", "output_index": 1, "item": output[1]},
        {"type": "response.completed", "response": {"status": "completed"}},
    ]  # fmt: skip
    assert openai_responses.assistant_messages(parse(events)) == items


def test_bedrock_reasoning_blocks_are_replayed_whole_and_streamed() -> None:
    reasoning = {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "c2ln"}}}
    tool_use = {"toolUse": {"toolUseId": "b1", "name": "f", "input": {"a": 1}}}
    payload = {
        "output": {"message": {"role": "assistant", "content": [reasoning, tool_use]}},
        "stopReason": "tool_use",
    }
    (message,) = bedrock.assistant_messages(parse(payload))
    assert message["content"] == [reasoning, tool_use]
    events = [
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "m"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2ln"}}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"contentBlockStart": {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "b1", "name": "f"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"a": 1}'}}}},
        {"contentBlockStop": {"contentBlockIndex": 1}},
        {"messageStop": {"stopReason": "tool_use"}},
    ]  # fmt: skip
    assert bedrock.assistant_messages(parse(events)) == [message]


def test_ollama_thinking_and_real_ids_go_back_with_the_turn() -> None:
    payload = {
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "hmm",
            "tool_calls": [{"id": "o1", "function": {"name": "f", "arguments": {"a": 1}}}],
        },
        "done": True,
        "done_reason": "stop",
    }
    (message,) = assistant_messages(parse(payload), "ollama")
    assert message == {
        "role": "assistant",
        "content": "",
        "thinking": "hmm",
        "tool_calls": [{"id": "o1", "function": {"name": "f", "arguments": {"a": 1}}}],
    }


# --- issue 9 §1 wire details ------------------------------------------------------------

GEMINI_COMPAT_CALL = {
    "id": "function-call-1",
    "type": "function",
    "function": {"name": "check_flight", "arguments": '{"flight":"AA100"}'},
    "extra_content": {"google": {"thought_signature": "c2lnbmF0dXJl"}},
}


def test_gemini_openai_compatible_thought_signature_is_kept_and_replayed() -> None:
    payload = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [GEMINI_COMPAT_CALL],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    parsed = openai_chat.parse_response(payload)
    assert parsed.calls[0].extra["extra_content"] == GEMINI_COMPAT_CALL["extra_content"]
    (message,) = openai_chat.assistant_messages(parsed)
    assert message == {"role": "assistant", "content": None, "tool_calls": [GEMINI_COMPAT_CALL]}
    first = {
        "index": 0,
        **GEMINI_COMPAT_CALL,
        "function": {"name": "check_flight", "arguments": '{"flight":'},
    }
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [first]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"AA100"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ]  # fmt: skip
    streamed = parse(chunks)
    assert streamed.calls == parsed.calls
    assert openai_chat.assistant_messages(streamed) == [message]


def test_gemini_tool_without_parameters_sends_no_parameters() -> None:
    specs = [
        ToolSpec("get_time", "The time."),
        ToolSpec("now", "Now.", {"type": "object", "properties": {}}),
    ]
    (tool,) = gemini.definitions(specs)
    assert tool["functionDeclarations"] == [
        {"name": "get_time", "description": "The time."},
        {"name": "now", "description": "Now."},
    ]
    assert gemini.definitions(specs, json_schema=True) == [tool]
    assert [s.parameters for s in gemini.parse_definitions([tool])] == [
        NO_PARAMETERS,
        NO_PARAMETERS,
    ]


def test_openai_tool_without_parameters_leaves_the_key_out_and_reads_back_the_same() -> None:
    spec = ToolSpec("get_time", "The time.")
    assert not spec.has_parameters
    (chat,) = openai_chat.definitions([spec])
    assert chat == {
        "type": "function",
        "function": {"name": "get_time", "description": "The time.", "strict": False},
    }
    assert openai_chat.parse_definitions([chat]) == [spec]
    (responses,) = openai_responses.definitions([spec])
    assert responses["parameters"] is None  # the Responses API requires the key
    assert openai_responses.parse_definitions([responses]) == [spec]
    (strict,) = openai_chat.definitions([spec], strict=True)
    assert strict["function"]["parameters"] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    assert anthropic.definitions([spec])[0]["input_schema"] == {"type": "object", "properties": {}}


def test_openai_compatible_reasoning_content_goes_back_with_the_turn() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Think first.",
        "tool_calls": [call],
    }
    payload = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    assert openai_chat.assistant_messages(parse(payload)) == [message]
    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Think "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "first."}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    assert openai_chat.assistant_messages(parse(chunks)) == [message]


def test_ollama_and_gemini_streams_render_like_their_whole_responses() -> None:
    call = {"id": "o1", "function": {"name": "f", "arguments": {"a": 1}}}
    ollama_chunks = [
        {"message": {"role": "assistant", "content": "", "thinking": "hm"}, "done": False},
        {"message": {"role": "assistant", "content": "", "thinking": "m"}, "done": False},
        {"message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False},
        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"},
    ]
    whole = {
        "message": {"role": "assistant", "content": "", "thinking": "hmm", "tool_calls": [call]},
        "done": True,
        "done_reason": "stop",
    }
    assert assistant_messages(parse(ollama_chunks), "ollama") == assistant_messages(
        parse(whole), "ollama"
    )
    parts = [
        {"text": "pondering", "thought": True},
        {"text": "Sure.", "thoughtSignature": "dGV4dA=="},
        {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "Y2FsbA=="},
    ]
    gemini_chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [part]}}]} for part in parts
    ]
    gemini_chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    gemini_whole = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]
    }
    assert parse(gemini_chunks).parts == parse(gemini_whole).parts
    assert gemini.assistant_messages(parse(gemini_chunks)) == [{"role": "model", "parts": parts}]


def _sdk_check(format: str, messages: list[dict[str, Any]]) -> None:
    """The rendered turn validates against the provider SDK's own request types."""
    for message in messages:
        if format == "openai_chat":
            TypeAdapter(ChatCompletionAssistantMessageParam).validate_python(message)
        elif format == "openai_responses":
            TypeAdapter(ResponseInputItemParam).validate_python(message)
        elif format == "anthropic":
            TypeAdapter(anthropic_types.MessageParam).validate_python(message)
        elif format == "gemini":
            genai.Content.model_validate(message)
        elif format == "ollama":
            ollama_sdk.Message.model_validate(message)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_rendered_turns_are_valid_sdk_requests(path: Path) -> None:
    format = path.parent.name
    _sdk_check(format, assistant_messages(parse(_payload(path)), format))


def test_rendered_opaque_items_are_valid_sdk_requests() -> None:
    _sdk_check("anthropic", assistant_messages(parse(ANTHROPIC_TURN), "anthropic"))
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ZW5j"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "f",
            "arguments": "{}",
        },
    ]
    parsed = parse({"object": "response", "status": "completed", "output": output})
    _sdk_check("openai_responses", assistant_messages(parsed, "openai_responses"))
