"""Structured output: ``output_type=`` validated through a final_result tool, with retries."""

from __future__ import annotations

import json
from pathlib import Path

import openai
from pydantic import BaseModel, Field
from tests.agent import sample_tools
from tests.agent.scripted_server import ScriptedServer, openai_chat_stream
from typing_extensions import TypedDict

from toolbridge import ToolCallRequest
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    ScriptedModel,
    StopReason,
    ToolResultsMessage,
    UserMessage,
)
from toolbridge.agent.adapters import OpenAIChatModel


class Forecast(BaseModel):
    city: str
    high_c: int = Field(ge=-90, le=60)


def final(arguments: dict[str, object], call_id: str = "f1") -> AssistantMessage:
    return AssistantMessage(
        calls=(ToolCallRequest(call_id, "final_result", json.dumps(arguments)),)
    )


def test_one_failed_attempt_then_a_valid_answer() -> None:
    model = ScriptedModel(
        [final({"city": "Oslo", "high_c": 400}), final({"city": "Oslo", "high_c": "12"}, "f2")]
    )
    runner = AgentRunner(model, output_type=Forecast)
    assert runner.registry.tool_names == ["final_result"]
    result = runner.run_sync("Forecast?")
    assert result.stop_reason is StopReason.FINAL
    assert result.output_value == Forecast(city="Oslo", high_c=12)
    error = model.requests[1][-1]
    assert error["role"] == "tool" and error["content"].startswith("Error")
    assert "high_c" in error["content"]  # the model is told where the problem is


def test_retries_are_bounded() -> None:
    bad = [final({"city": "Oslo"}, f"f{i}") for i in range(5)]
    result = AgentRunner(ScriptedModel(bad), output_type=Forecast, output_retries=1).run_sync("?")
    assert result.stop_reason is StopReason.OUTPUT_INVALID
    assert result.turns == 2 and result.output_value is None


def test_a_json_text_answer_is_accepted_and_prose_is_sent_back() -> None:
    model = ScriptedModel(
        [
            AssistantMessage(text="It will be warm."),
            AssistantMessage(text='{"city": "Rome", "high_c": 30}'),
        ]
    )
    result = AgentRunner(model, output_type=Forecast).run_sync("?")
    assert result.output_value == Forecast(city="Rome", high_c=30)
    nudge = result.conversation[2]
    assert isinstance(nudge, UserMessage) and "final_result" in nudge.text


def test_non_object_types_are_wrapped() -> None:
    class Pair(TypedDict):
        a: int

    model = ScriptedModel([final({"result": [1, 2, 3]})])
    assert AgentRunner(model, output_type=list[int]).run_sync("?").output_value == [1, 2, 3]
    model = ScriptedModel([final({"a": "5"})])
    assert AgentRunner(model, output_type=Pair).run_sync("?").output_value == {"a": 5}


async def test_structured_output_over_openai_chat(server: ScriptedServer, workspace: Path) -> None:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    server.add(
        openai_chat_stream(calls=[("call_1", "final_result", '{"city": "Lima", "high_c": 99}')]),
        openai_chat_stream(calls=[("call_2", "final_result", '{"city": "Lima", "high_c": 21}')]),
    )
    runner = AgentRunner(
        OpenAIChatModel("gpt-test", client=client),
        sample_tools.registry(workspace),
        output_type=Forecast,
        output_mode="tool",
    )
    result = await runner.run("Forecast for Lima?")
    assert result.output_value == Forecast(city="Lima", high_c=21)
    first, second = server.bodies()
    final_tool = next(t for t in first["tools"] if t["function"]["name"] == "final_result")
    assert final_tool["function"]["parameters"]["properties"]["high_c"]["maximum"] == 60
    feedback = second["messages"][-1]
    assert feedback["tool_call_id"] == "call_1" and "high_c" in feedback["content"]
    assert isinstance(result.conversation[-1], ToolResultsMessage)
