"""The Anthropic Messages adapter: the real ``anthropic`` SDK against a scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest
from tests.agent import sample_tools
from tests.agent.resume_child import resume_in_subprocess
from tests.agent.scripted_server import ScriptedServer, anthropic_error, anthropic_stream

from toolbridge.agent import (
    AssistantMessage,
    ModelServerError,
    RateLimitError,
    ReasoningDelta,
    RunState,
    StopReason,
    TextDelta,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
)
from toolbridge.agent.adapters import AnthropicModel

REPO = Path(__file__).resolve().parents[2]

THINKING = {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "c2lnLTE="}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}


def model(server: ScriptedServer) -> AnthropicModel:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key", max_retries=0)
    return AnthropicModel("claude-test", client=client)


async def test_multi_turn_run_replays_thinking_and_parallel_calls(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        anthropic_stream(
            [
                THINKING,
                REDACTED,
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
            usage=(30, 11),
        ),
        anthropic_stream([{"type": "text", "text": "Sunny in both."}], usage=(60, 4)),
    )
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("Weather in Paris and Rome?")]

    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "Two cities, two calls."
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Checking both.Sunny in both."
    outcomes = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.result.content for o in outcomes] == ["Sunny in Paris", "Sunny in Rome"]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in both."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (90, 15)
    first_turn = result.conversation[1]
    assert isinstance(first_turn, AssistantMessage)
    assert first_turn.reasoning == "Two cities, two calls."

    first, second = server.bodies()
    assert first["system"] == "You help."
    assert first["max_tokens"] == 4096 and first["stream"] is True
    assert [t["name"] for t in first["tools"]] == ["get_weather", "write_note"]
    assert first["tools"][0]["input_schema"]["properties"] == {"city": {"type": "string"}}
    assert first["messages"] == [{"role": "user", "content": "Weather in Paris and Rome?"}]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                THINKING,  # replayed exactly, signature included
                REDACTED,
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "Sunny in Paris",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "Sunny in Rome",
                    "is_error": False,
                },
            ],
        },
    ]


def test_approval_pause_resumed_in_a_new_process(
    server: ScriptedServer, workspace: Path, tmp_path: Path
) -> None:
    server.add(
        anthropic_stream(
            [
                THINKING,
                {
                    "type": "tool_use",
                    "id": "toolu_w",
                    "name": "write_note",
                    "input": {"name": "n.txt", "text": "keep"},
                },
            ]
        )
    )
    runner = sample_tools.runner(model(server), workspace)
    paused = runner.run_sync("Write it.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    assert [p.call.id for p in paused.pending] == ["toolu_w"]
    assert not (workspace / "n.txt").exists()

    server.add(anthropic_stream([{"type": "text", "text": "Written."}]))
    decisions = [paused.pending[0].approve()]
    out = resume_in_subprocess(
        "anthropic", server.url, workspace, tmp_path, paused.state, decisions
    )
    assert out["output"] == "Written."
    assert (workspace / "n.txt").read_text() == "keep\n"
    resumed = server.bodies()[1]["messages"]
    assert resumed[1]["content"][0] == THINKING  # the signature survived the JSON state
    assert resumed[2]["content"][0]["tool_use_id"] == "toolu_w"
    assert resumed[2]["content"][0]["content"] == "wrote 4 characters to n.txt"


async def test_a_turn_cut_off_by_max_tokens_runs_no_call(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        anthropic_stream(
            [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "write_note",
                    "input": {"name": "x.txt", "text": "long"},
                }
            ],
            stop_reason="max_tokens",
        )
    )
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("Write.")]
    assert not [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert isinstance(result.conversation[-1], ToolResultsMessage)
    assert not (workspace / "x.txt").exists()


async def test_rate_limit_then_resume(server: ScriptedServer, workspace: Path) -> None:
    server.add(anthropic_error(429, "rate_limit_error", "Number of request tokens exceeded"))
    runner = sample_tools.runner(model(server), workspace)
    with pytest.raises(RateLimitError) as info:
        await runner.run("hi")
    assert len(server.requests) == 1
    assert info.value.state is not None
    state = RunState.from_json(json.dumps(info.value.state.to_json()))
    server.add(anthropic_stream([{"type": "text", "text": "Hello."}]))
    assert (await runner.run(state)).output == "Hello."


async def test_overloaded_is_a_server_error(server: ScriptedServer, workspace: Path) -> None:
    server.add(anthropic_error(529, "overloaded_error", "Overloaded"))
    runner = sample_tools.runner(model(server), workspace)
    with pytest.raises(ModelServerError, match="Overloaded"):
        await runner.run("hi")
