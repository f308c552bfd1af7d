"""The Bedrock Converse adapter: real boto3 against a scripted event-stream server."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from tests.agent import sample_tools
from tests.agent.resume_child import resume_in_subprocess
from tests.agent.scripted_server import ScriptedServer, bedrock_error, bedrock_stream

from toolbridge.agent import (
    RateLimitError,
    ReasoningDelta,
    StopReason,
    ToolFinished,
    ToolStarted,
    UserMessage,
)
from toolbridge.agent.adapters import BedrockModel

REASONING = {"reasoningContent": {"reasoningText": {"text": "Two cities.", "signature": "c2ln"}}}


def model(url: str) -> BedrockModel:
    client = boto3.client(
        "bedrock-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )
    return BedrockModel("anthropic.claude-sonnet-4-5-20250929-v1:0", client=client)


def use(tool_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {"toolUse": {"toolUseId": tool_id, "name": name, "input": arguments}}


async def test_multi_turn_run_replays_reasoning_and_parallel_calls(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        bedrock_stream(
            [
                REASONING,
                {"text": "Checking."},
                use("tu_a", "get_weather", {"city": "Paris"}),
                use("tu_b", "get_weather", {"city": "Rome"}),
            ]
        ),
        bedrock_stream([{"text": "Sunny in both."}], usage=(50, 4)),
    )
    runner = sample_tools.runner(model(server.url), workspace)
    events = [event async for event in runner.stream("Weather?")]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Two cities."
    outcomes = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.result.content for o in outcomes] == ["Sunny in Paris", "Sunny in Rome"]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in both."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (71, 12)

    model_id = "anthropic.claude-sonnet-4-5-20250929-v1%3A0"
    assert server.requests[0].path == f"/model/{model_id}/converse-stream"
    first, second = server.bodies()
    assert first["system"] == [{"text": "You help."}]
    specs = [tool["toolSpec"] for tool in first["toolConfig"]["tools"]]
    assert [spec["name"] for spec in specs] == ["get_weather", "write_note"]
    assert specs[0]["inputSchema"]["json"]["required"] == ["city"]
    assert first["messages"] == [{"role": "user", "content": [{"text": "Weather?"}]}]
    assistant, results = second["messages"][1:]
    assert assistant["content"] == [
        REASONING,
        {"text": "Checking."},
        use("tu_a", "get_weather", {"city": "Paris"}),
        use("tu_b", "get_weather", {"city": "Rome"}),
    ]
    assert [block["toolResult"]["toolUseId"] for block in results["content"]] == ["tu_a", "tu_b"]
    assert results["content"][0]["toolResult"]["content"] == [{"text": "Sunny in Paris"}]


def test_approval_pause_resumed_in_a_new_process(
    server: ScriptedServer, workspace: Path, tmp_path: Path
) -> None:
    server.add(bedrock_stream([use("tu_w", "write_note", {"name": "k.txt", "text": "aws"})]))
    paused = sample_tools.runner(model(server.url), workspace).run_sync("Write.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    server.add(bedrock_stream([{"text": "Written."}]))
    decisions = [paused.pending[0].approve()]
    out = resume_in_subprocess("bedrock", server.url, workspace, tmp_path, paused.state, decisions)
    assert out["output"] == "Written."
    assert (workspace / "k.txt").read_text() == "aws\n"


async def test_a_cut_off_turn_runs_no_call(server: ScriptedServer, workspace: Path) -> None:
    server.add(
        bedrock_stream(
            [use("tu_1", "write_note", {"name": "z", "text": "t"})], stop_reason="max_tokens"
        )
    )
    events = [e async for e in sample_tools.runner(model(server.url), workspace).stream("go")]
    assert not [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    assert events[-1].result.stop_reason is StopReason.MAX_TOKENS  # type: ignore[union-attr]


async def test_throttling_is_a_rate_limit(server: ScriptedServer, workspace: Path) -> None:
    server.add(bedrock_error(429, "ThrottlingException", "Too many requests, please wait."))
    with pytest.raises(RateLimitError, match="ThrottlingException") as info:
        await sample_tools.runner(model(server.url), workspace).run("hi")
    assert len(server.requests) == 1
    assert info.value.conversation == [UserMessage("hi")]


async def test_consecutive_user_turns_are_merged(server: ScriptedServer, workspace: Path) -> None:
    server.add(
        bedrock_stream([use("tu_1", "get_weather", {"city": "Oslo"})]),
        bedrock_stream([{"text": "Sunny."}]),
        bedrock_stream([{"text": "Still sunny."}]),
    )
    runner = sample_tools.runner(model(server.url), workspace, max_turns=1)
    first = await runner.run("Weather?")
    assert first.stop_reason is StopReason.MAX_TURNS
    state = first.state
    state.conversation.append(UserMessage("And now?"))
    runner = sample_tools.runner(model(server.url), workspace)
    await runner.run(state)
    messages = server.bodies()[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"][-1] == {"text": "And now?"}
    assert json.dumps(messages[-1]["content"][0]).startswith('{"toolResult"')


async def test_the_provider_string_builds_a_client_from_the_environment(
    server: ScriptedServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolbridge.agent import model_from_string

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    server.add(bedrock_stream([{"text": "Hi."}]))
    adapter = model_from_string("bedrock:amazon.nova-test", base_url=server.url)
    result = await sample_tools.runner(adapter, workspace).run("hi")
    assert result.output == "Hi."
    assert server.requests[0].path == "/model/amazon.nova-test/converse-stream"
    assert "eu-west-1" in server.requests[0].headers["authorization"]
