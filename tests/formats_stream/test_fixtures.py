"""Recorded provider streams (one fixture per case) assemble to the expected calls.

Each case is the provider's events as JSON lines plus the expected text, finish reason
and calls. The same events are also checked against the provider SDK's own types and
fed as SDK objects, so the fixtures stay faithful to the real wire shapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ErrorKind, FunctionTool, ToolRegistry
from toolbridge.core.calls import ToolCallRequest, decode_arguments
from toolbridge.formats.streaming import StreamResult, assemble, stream_adapter

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(FIXTURES.glob("*/*.jsonl"))


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _expected(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.stem + ".expected.json").read_text(encoding="utf-8"))


def _check(result: StreamResult, expected: dict[str, Any]) -> None:
    assert result.text == expected["text"]
    assert result.finish_reason == expected["finish_reason"]
    assert len(result.calls) == len(expected["calls"])
    for call, want in zip(result.calls, expected["calls"], strict=True):
        assert call.name == want["name"]
        assert dict(call.extra) == want["extra"]
        if want["id"] is None:
            assert call.id.startswith("call_")
        else:
            assert call.id == want["id"]
        if "raw_arguments" in want:
            assert call.arguments == want["raw_arguments"]
        elif isinstance(call.arguments, str):
            assert (decode_arguments(call.arguments) if call.arguments else {}) == want["arguments"]
        else:
            assert call.arguments == want["arguments"]
    assert len({call.id for call in result.calls}) == len(result.calls)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_assembles_to_expected_calls(path: Path) -> None:
    _check(assemble(path.parent.name, _events(path)), _expected(path))


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_calls_come_out_as_events_finish_them(path: Path) -> None:
    """feed() + close() yield every call exactly once, the same ones result() reports."""
    adapter = stream_adapter(path.parent.name)
    emitted: list[ToolCallRequest] = []
    for event in _events(path):
        emitted.extend(adapter.feed(event))
    emitted.extend(adapter.close())
    assert sorted(c.id for c in emitted) == sorted(c.id for c in adapter.result().calls)


def _sdk_events(provider: str, events: list[dict[str, Any]]) -> list[Any]:
    """The events parsed by the provider's own SDK types (strict shape check)."""
    if provider == "openai_chat":
        from openai.types.chat import ChatCompletionChunk

        return [ChatCompletionChunk.model_validate(e) for e in events]
    if provider == "openai_responses":
        from openai.types.responses import ResponseStreamEvent
        from pydantic import TypeAdapter

        responses_adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
        return [responses_adapter.validate_python(e) for e in events]
    if provider == "anthropic":
        from anthropic.types import RawMessageStreamEvent
        from pydantic import TypeAdapter

        anthropic_adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
        return [anthropic_adapter.validate_python(e) for e in events]
    if provider == "gemini":
        from google.genai.types import GenerateContentResponse

        return [GenerateContentResponse.model_validate(e) for e in events]
    if provider == "ollama":
        from ollama import ChatResponse

        return [ChatResponse.model_validate(e) for e in events]
    raise AssertionError(provider)


# boto3 yields plain dicts for Bedrock; index-less chunks come from OpenAI-compatible
# servers, not from OpenAI, whose SDK type requires the index.
SDK_CASES = [p for p in CASES if p.parent.name != "bedrock" and p.stem != "no_index"]


@pytest.mark.parametrize("path", SDK_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_sdk_objects_assemble_like_wire_json(path: Path) -> None:
    provider = path.parent.name
    sdk_events = _sdk_events(provider, _events(path))
    _check(assemble(provider, sdk_events), _expected(path))


def test_cut_off_arguments_reach_the_model_as_a_truncation_error() -> None:
    """A call cut by the token limit is emitted raw; the registry refuses it and says why."""

    def write_file(path: str, content: str) -> str:
        raise AssertionError("a truncated call must never run")

    registry = ToolRegistry([FunctionTool(write_file)])
    path = FIXTURES / "openai_chat" / "truncated_length.jsonl"
    (call,) = assemble("openai_chat", _events(path)).calls
    prepared = registry.prepare_call(call.name, call.arguments)
    assert prepared.error is not None
    assert prepared.error.kind is ErrorKind.ARGUMENTS_NOT_JSON
    assert "cut off" in prepared.error.message
