"""Native structured output: every adapter sends its provider's structured-output field
with the schema, the answer's text is validated, and a failure is told to the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest
from pydantic import BaseModel, Field
from tests.agent import sample_tools
from tests.agent.scripted_server import (
    Reply,
    ScriptedServer,
    anthropic_stream,
    bedrock_stream,
    gemini_stream,
    ollama_stream,
    openai_chat_stream,
    responses_stream,
)
from tests.agent.test_deadline import PROVIDERS, adapter, answer

from toolbridge.agent import AgentRunner, StopReason, ToolResultsMessage
from toolbridge.agent.adapters import AnthropicModel


class Forecast(BaseModel):
    city: str
    high_c: int = Field(ge=-90, le=60)


class Open(BaseModel):
    city: str
    extra: dict[str, int]  # an open object: no closed form


def call_reply(provider: str, call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    """A turn with one tool call, in `provider`'s stream."""
    text = json.dumps(arguments)
    if provider == "openai_chat":
        return openai_chat_stream(calls=[(call_id, name, text)])
    if provider == "openai_responses":
        item = {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": text,
            "status": "completed",
        }
        return responses_stream([item])
    if provider == "anthropic":
        return anthropic_stream(
            [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]
        )
    if provider == "gemini":
        return gemini_stream([{"functionCall": {"name": name, "args": arguments}}])
    if provider == "bedrock":
        return bedrock_stream(
            [{"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}]
        )
    return ollama_stream(calls=[(name, arguments)])


def sent_schema(provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """The schema in the provider's documented structured-output field of a request."""
    if provider == "openai_chat":
        response_format = body["response_format"]
        assert response_format["type"] == "json_schema"
        fields = response_format["json_schema"]
        assert fields["name"] == "Forecast" and fields["strict"] is True
        return dict(fields["schema"])
    if provider == "openai_responses":
        fields = body["text"]["format"]
        assert fields["type"] == "json_schema"
        assert fields["name"] == "Forecast" and fields["strict"] is True
        return dict(fields["schema"])
    if provider == "anthropic":
        fields = body["output_config"]["format"]
        assert fields["type"] == "json_schema"
        return dict(fields["schema"])
    if provider == "gemini":
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        return dict(config["responseJsonSchema"])
    if provider == "bedrock":
        text_format = body["outputConfig"]["textFormat"]
        assert text_format["type"] == "json_schema"
        definition = text_format["structure"]["jsonSchema"]
        assert definition["name"] == "Forecast"
        return dict(json.loads(definition["schema"]))  # Converse takes the schema as a string
    return dict(body["format"])


def tool_names(provider: str, body: dict[str, Any]) -> list[str]:
    if provider == "openai_chat":
        return [tool["function"]["name"] for tool in body.get("tools", ())]
    if provider in ("openai_responses", "anthropic"):
        return [tool["name"] for tool in body.get("tools", ())]
    if provider == "gemini":
        return [d["name"] for tool in body.get("tools", ()) for d in tool["functionDeclarations"]]
    if provider == "bedrock":
        return [t["toolSpec"]["name"] for t in body.get("toolConfig", {}).get("tools", ())]
    return [tool["function"]["name"] for tool in body.get("tools", ())]


def last_user_text(provider: str, body: dict[str, Any]) -> str:
    """The text of the last message of a request (the runner's feedback), which must be
    the user's."""
    if provider == "openai_responses":
        message = body["input"][-1]
    elif provider == "gemini":
        message = body["contents"][-1]
        assert message["role"] == "user"
        return str(message["parts"][0]["text"])
    else:
        message = body["messages"][-1]
    assert message["role"] == "user"
    content = message["content"]
    if isinstance(content, list):  # Bedrock's content blocks
        return str(content[0]["text"])
    return str(content)


def check_schema(provider: str, schema: dict[str, Any]) -> None:
    """The schema sent is the output type's, in the form the provider's rules need."""
    assert schema["type"] == "object" and schema["required"] == ["city", "high_c"]
    high_c = schema["properties"]["high_c"]
    if provider in ("anthropic", "bedrock"):
        assert schema["additionalProperties"] is False
        # JSON outputs support no numeric bounds: they move into the description
        assert "maximum" not in high_c and "maximum: 60" in high_c["description"]
    else:
        assert high_c["maximum"] == 60 and high_c["minimum"] == -90
        if provider.startswith("openai"):
            assert schema["additionalProperties"] is False  # strict mode closes objects


# Ten times the recursion limit Python's JSON parser stops at (100,000 levels before: the
# same failure, but 200 KB streamed through every provider's SDK cost seconds per provider).
DEEPER = 10 * sys.getrecursionlimit()

FAILURES = {
    "invalid_json": ("Oslo: 9 degrees", "not valid JSON"),
    "schema_violation": ('{"city": "Oslo", "high_c": 400}', "high_c"),
    # Deeper than Python's JSON parser recurses: a told failure, not a RecursionError.
    "too_deep": (
        '{"city": ' + "[" * DEEPER + "]" * DEEPER + "}",
        "nested too deeply",
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_native_output_with_one_failed_attempt(
    server: ScriptedServer, workspace: Path, provider: str, failure: str
) -> None:
    bad, problem = FAILURES[failure]
    server.add(answer(provider, bad), answer(provider, '{"city": "Oslo", "high_c": 9}'))
    runner = AgentRunner(
        adapter(provider, server.url), sample_tools.registry(workspace), output_type=Forecast
    )
    assert runner.native_output is not None and "final_result" not in runner.registry.tool_names
    result = await runner.run("Forecast for Oslo?")

    assert result.stop_reason is StopReason.FINAL
    assert result.output_value == Forecast(city="Oslo", high_c=9)
    assert result.turns == 2
    first, second = server.bodies()
    check_schema(provider, sent_schema(provider, first))
    assert sent_schema(provider, second) == sent_schema(provider, first)
    assert "final_result" not in tool_names(provider, first)
    assert "get_weather" in tool_names(provider, first)
    feedback = last_user_text(provider, second)
    assert feedback.startswith("Error") and problem in feedback
    assert "JSON value that matches the schema" in feedback  # what to do about it


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tools_then_an_answer_in_the_schema(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    server.add(
        call_reply(provider, "call_1", "get_weather", {"city": "Oslo"}),
        answer(provider, '{"city": "Oslo", "high_c": 12}'),
    )
    runner = AgentRunner(
        adapter(provider, server.url), sample_tools.registry(workspace), output_type=Forecast
    )
    result = await runner.run("Forecast for Oslo?")
    assert result.stop_reason is StopReason.FINAL
    assert result.output_value == Forecast(city="Oslo", high_c=12)
    returns = [m for m in result.conversation if isinstance(m, ToolResultsMessage)]
    assert [r.result.content for m in returns for r in m.results] == ["Sunny in Oslo"]
    first, second = server.bodies()
    check_schema(provider, sent_schema(provider, first))
    assert "Sunny in Oslo" in json.dumps(second)  # the tool's result went back


async def test_retries_are_bounded_natively(server: ScriptedServer, workspace: Path) -> None:
    server.add(*(answer("openai_chat", "no idea") for _ in range(2)))
    runner = AgentRunner(
        adapter("openai_chat", server.url),
        sample_tools.registry(workspace),
        output_type=Forecast,
        output_retries=1,
    )
    result = await runner.run("Forecast?")
    assert result.stop_reason is StopReason.OUTPUT_INVALID
    assert result.turns == 2 and result.output_value is None
    assert len(server.requests) == 2


async def test_an_open_schema_falls_back_to_the_tool_on_anthropic(
    server: ScriptedServer, workspace: Path
) -> None:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
    model = AnthropicModel("claude-sonnet-4-5", client=client)
    block = {
        "type": "tool_use",
        "id": "f1",
        "name": "final_result",
        "input": {"city": "Oslo", "extra": {"rain_mm": 3}},
    }
    server.add(anthropic_stream([block]))
    runner = AgentRunner(model, sample_tools.registry(workspace), output_type=Open)
    assert runner.native_output is None
    result = await runner.run("Forecast?")
    assert result.output_value == Open(city="Oslo", extra={"rain_mm": 3})
    body = server.bodies()[0]
    assert "output_config" not in body
    assert "final_result" in tool_names("anthropic", body)

    with pytest.raises(ValueError, match="keys beyond its properties"):
        AgentRunner(model, output_type=Open, output_mode="native")


async def test_output_mode_tool_uses_the_tool_where_native_exists(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(call_reply("ollama", "x", "final_result", {"city": "Oslo", "high_c": 3}))
    runner = AgentRunner(
        adapter("ollama", server.url),
        sample_tools.registry(workspace),
        output_type=Forecast,
        output_mode="tool",
    )
    result = await runner.run("Forecast?")
    assert result.output_value == Forecast(city="Oslo", high_c=3)
    body = server.bodies()[0]
    assert "format" not in body and "final_result" in tool_names("ollama", body)


class WithDefault(BaseModel):
    city: str
    days: int = 3


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses"])
async def test_a_schema_strict_mode_cannot_express_is_sent_non_strict(
    server: ScriptedServer, workspace: Path, provider: str
) -> None:
    server.add(answer(provider, '{"city": "Oslo"}'))
    runner = AgentRunner(adapter(provider, server.url), output_type=WithDefault)
    result = await runner.run("Forecast?")
    assert result.output_value == WithDefault(city="Oslo", days=3)
    body = server.bodies()[0]
    fields = (
        body["response_format"]["json_schema"]
        if provider == "openai_chat"
        else body["text"]["format"]
    )
    assert fields["strict"] is False and fields["name"] == "WithDefault"
    assert fields["schema"] == WithDefault.model_json_schema()  # as pydantic made it
