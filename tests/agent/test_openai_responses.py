"""The OpenAI Responses adapter: the real ``openai`` SDK against a scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from tests.agent import sample_tools
from tests.agent.resume_child import resume_in_subprocess
from tests.agent.scripted_server import ScriptedServer, openai_error, responses_stream

from toolbridge.agent import RateLimitError, RunState, StopReason, ToolFinished, ToolStarted
from toolbridge.agent.adapters import OpenAIResponsesModel

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Two lookups."}],
    "encrypted_content": "ZW5jcnlwdGVk",
}


def model(server: ScriptedServer, **options: object) -> OpenAIResponsesModel:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
    return OpenAIResponsesModel("gpt-test", client=client, **options)  # type: ignore[arg-type]


def call_item(item_id: str, call_id: str, city: str) -> dict[str, object]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": "get_weather",
        "arguments": json.dumps({"city": city}),
        "status": "completed",
    }


def message_item(text: str) -> dict[str, object]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


async def test_multi_turn_run_replays_reasoning_items_and_call_ids(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        responses_stream(
            [REASONING, call_item("fc_a", "call_a", "Paris"), call_item("fc_b", "call_b", "Rome")]
        ),
        responses_stream([message_item("Sunny in both.")], usage=(50, 4)),
    )
    runner = sample_tools.runner(model(server, stateless=True), workspace)
    events = [event async for event in runner.stream("Weather in Paris and Rome?")]
    outcomes = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.result.content for o in outcomes] == ["Sunny in Paris", "Sunny in Rome"]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in both."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (75, 12)

    first, second = server.bodies()
    assert first["instructions"] == "You help."
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert first["input"] == [{"role": "user", "content": "Weather in Paris and Rome?"}]
    assert [t["name"] for t in first["tools"]] == ["get_weather", "write_note"]
    assert first["tools"][0]["type"] == "function" and "strict" in first["tools"][0]
    replay = second["input"][1:]
    assert replay[0] == REASONING  # encrypted content replayed exactly
    assert [(i["type"], i.get("id"), i["call_id"]) for i in replay[1:3]] == [
        ("function_call", "fc_a", "call_a"),
        ("function_call", "fc_b", "call_b"),
    ]
    assert replay[3:] == [
        {"type": "function_call_output", "call_id": "call_a", "output": "Sunny in Paris"},
        {"type": "function_call_output", "call_id": "call_b", "output": "Sunny in Rome"},
    ]


async def test_an_incomplete_response_runs_no_call(server: ScriptedServer, workspace: Path) -> None:
    item = call_item("fc_a", "call_a", "Paris")
    item["arguments"] = '{"city": "Pa'
    server.add(responses_stream([item], incomplete="max_output_tokens"))
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("Weather?")]
    assert not [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    assert events[-1].result.stop_reason is StopReason.MAX_TOKENS  # type: ignore[union-attr]


async def test_rate_limit(server: ScriptedServer, workspace: Path) -> None:
    server.add(openai_error(429, "Rate limit reached", "rate_limit_exceeded"))
    runner = sample_tools.runner(model(server), workspace)
    with pytest.raises(RateLimitError) as info:
        await runner.run("hi")
    assert len(server.requests) == 1
    assert info.value.state is not None
    server.add(responses_stream([message_item("Hello.")]))
    state = RunState.from_json(json.dumps(info.value.state.to_json()))
    assert (await runner.run(state)).output == "Hello."


def test_approval_pause_resumed_in_a_new_process(
    server: ScriptedServer, workspace: Path, tmp_path: Path
) -> None:
    write = {
        "type": "function_call",
        "id": "fc_w",
        "call_id": "call_w",
        "name": "write_note",
        "arguments": json.dumps({"name": "r.txt", "text": "no"}),
        "status": "completed",
    }
    server.add(responses_stream([REASONING, write]))
    paused = sample_tools.runner(model(server), workspace).run_sync("Write.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    server.add(responses_stream([message_item("Skipped.")]))
    decisions = [paused.pending[0].deny("read-only today")]
    out = resume_in_subprocess(
        "openai_responses", server.url, workspace, tmp_path, paused.state, decisions
    )
    assert out["output"] == "Skipped."
    assert not (workspace / "r.txt").exists()
    replay = server.bodies()[1]["input"]
    assert replay[1] == REASONING
    output = replay[-1]
    assert output["type"] == "function_call_output" and output["call_id"] == "call_w"
    assert output["output"].startswith("Error") and "read-only today" in output["output"]
