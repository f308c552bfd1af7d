"""The native Ollama adapter: the real ``ollama`` SDK against a scripted NDJSON server."""

from __future__ import annotations

from pathlib import Path

import ollama
import pytest
from tests.agent import sample_tools
from tests.agent.resume_child import resume_in_subprocess
from tests.agent.scripted_server import Reply, ScriptedServer, ollama_stream

from toolbridge.agent import (
    ModelConnectionError,
    RateLimitError,
    ReasoningDelta,
    StopReason,
    ToolFinished,
    ToolStarted,
)
from toolbridge.agent.adapters import OllamaModel


def model(server: ScriptedServer) -> OllamaModel:
    return OllamaModel("qwen3", client=ollama.AsyncClient(host=server.url))


async def test_multi_turn_run_with_parallel_calls_and_thinking(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        ollama_stream(
            thinking="Two cities.",
            calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})],
        ),
        ollama_stream(text="Sunny in both.", usage=(40, 3)),
    )
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("Weather?")]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Two cities."
    outcomes = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.result.content for o in outcomes] == ["Sunny in Paris", "Sunny in Rome"]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in both."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (55, 9)

    assert all(r.path == "/api/chat" for r in server.requests)
    first, second = server.bodies()
    assert first["messages"][0] == {"role": "system", "content": "You help."}
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "write_note"]
    replay = second["messages"][2:]
    assert replay[0]["role"] == "assistant" and replay[0]["thinking"] == "Two cities."
    assert [c["function"] for c in replay[0]["tool_calls"]] == [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": {"city": "Rome"}},
    ]
    assert [(m["role"], m["tool_name"], m["content"]) for m in replay[1:]] == [
        ("tool", "get_weather", "Sunny in Paris"),
        ("tool", "get_weather", "Sunny in Rome"),
    ]


def test_approval_pause_resumed_in_a_new_process(
    server: ScriptedServer, workspace: Path, tmp_path: Path
) -> None:
    server.add(ollama_stream(calls=[("write_note", {"name": "o.txt", "text": "yes"})]))
    paused = sample_tools.runner(model(server), workspace).run_sync("Write.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    server.add(ollama_stream(text="Written."))
    decisions = [paused.pending[0].approve()]
    out = resume_in_subprocess("ollama", server.url, workspace, tmp_path, paused.state, decisions)
    assert out["output"] == "Written."
    assert (workspace / "o.txt").read_text() == "yes\n"
    assert server.bodies()[1]["messages"][-1]["content"] == "wrote 3 characters to o.txt"


async def test_a_turn_cut_off_by_num_predict_runs_no_call(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        ollama_stream(calls=[("write_note", {"name": "z", "text": "t"})], done_reason="length")
    )
    events = [e async for e in sample_tools.runner(model(server), workspace).stream("go")]
    assert not [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    assert events[-1].result.stop_reason is StopReason.MAX_TOKENS  # type: ignore[union-attr]


async def test_rate_limit_and_unreachable_server(server: ScriptedServer, workspace: Path) -> None:
    server.add(Reply(429, {"error": "too many requests"}))
    with pytest.raises(RateLimitError, match="too many requests"):
        await sample_tools.runner(model(server), workspace).run("hi")
    gone = OllamaModel("qwen3", client=ollama.AsyncClient(host="http://127.0.0.1:9"))
    with pytest.raises(ModelConnectionError):
        await sample_tools.runner(gone, workspace).run("hi")
