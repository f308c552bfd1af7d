"""The same scenarios on every adapter: structured output with one failed attempt, and a
context-length refusal as a typed error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel
from tests.agent import sample_tools
from tests.agent.scripted_server import (
    Reply,
    ScriptedServer,
    anthropic_error,
    anthropic_stream,
    bedrock_error,
    bedrock_stream,
    gemini_error,
    gemini_stream,
    ollama_stream,
    openai_chat_stream,
    openai_error,
    responses_stream,
)
from tests.agent.test_deadline import PROVIDERS, adapter

from toolbridge.agent import AgentRunner, ContextLengthError, StopReason


class Forecast(BaseModel):
    city: str
    high_c: int


def final_call(provider: str, call_id: str, arguments: dict[str, object]) -> Reply:
    text = json.dumps(arguments)
    if provider == "openai_chat":
        return openai_chat_stream(calls=[(call_id, "final_result", text)])
    if provider == "openai_responses":
        item = {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": "final_result",
            "arguments": text,
            "status": "completed",
        }
        return responses_stream([item])
    if provider == "anthropic":
        block = {"type": "tool_use", "id": call_id, "name": "final_result", "input": arguments}
        return anthropic_stream([block])
    if provider == "gemini":
        return gemini_stream([{"functionCall": {"name": "final_result", "args": arguments}}])
    if provider == "bedrock":
        use = {"toolUseId": call_id, "name": "final_result", "input": arguments}
        return bedrock_stream([{"toolUse": use}])
    return ollama_stream(calls=[("final_result", arguments)])


def error_text(provider: str, body: dict[str, object]) -> str:
    """The text of the first error result the SDK sent back on the second request."""
    if provider == "openai_chat":
        return str(body["messages"][-1]["content"])  # type: ignore[index]
    if provider == "openai_responses":
        return str(body["input"][-1]["output"])  # type: ignore[index]
    if provider == "anthropic":
        return str(body["messages"][-1]["content"][0]["content"])  # type: ignore[index]
    if provider == "gemini":
        part = body["contents"][-1]["parts"][0]  # type: ignore[index]
        return json.dumps(part["functionResponse"]["response"])
    if provider == "bedrock":
        block = body["messages"][-1]["content"][0]["toolResult"]  # type: ignore[index]
        return json.dumps(block["content"])
    return str(body["messages"][-1]["content"])  # type: ignore[index]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_structured_output_with_one_failed_attempt(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    server.add(
        final_call(provider, "f1", {"city": "Oslo"}),
        final_call(provider, "f2", {"city": "Oslo", "high_c": 9}),
    )
    runner = AgentRunner(
        adapter(provider, server.url),
        sample_tools.registry(workspace),
        output_type=Forecast,
        output_mode="tool",
    )
    result = await runner.run("Forecast for Oslo?")
    assert result.stop_reason is StopReason.FINAL
    assert result.output_value == Forecast(city="Oslo", high_c=9)
    feedback = error_text(provider, server.bodies()[1])
    assert "Error" in feedback and "high_c" in feedback


CONTEXT_ERRORS = {
    "openai_chat": openai_error(
        400, "This model's maximum context length is 8192 tokens.", "context_length_exceeded"
    ),
    "openai_responses": openai_error(
        400, "Your input exceeds the context window of this model.", "context_length_exceeded"
    ),
    "anthropic": anthropic_error(
        400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"
    ),
    "gemini": gemini_error(
        400,
        "INVALID_ARGUMENT",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    ),
    "ollama": Reply(400, {"error": "the input length exceeds the context length"}),
    "bedrock": bedrock_error(400, "ValidationException", "Input is too long for requested model."),
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_context_length_is_a_typed_error(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    server.add(CONTEXT_ERRORS[provider])
    runner = sample_tools.runner(adapter(provider, server.url), workspace)
    with pytest.raises(ContextLengthError) as info:
        await runner.run("hi")
    assert info.value.status == 400
    assert info.value.state is not None
