"""The Gemini adapter: the real ``google-genai`` SDK against a scripted SSE server."""

from __future__ import annotations

from pathlib import Path

import pytest
from google import genai
from google.genai import types
from tests.agent import sample_tools
from tests.agent.resume_child import resume_in_subprocess
from tests.agent.scripted_server import ScriptedServer, gemini_error, gemini_stream

from toolbridge.agent import (
    RateLimitError,
    ReasoningDelta,
    StopReason,
    ToolFinished,
    ToolStarted,
)
from toolbridge.agent.adapters import GeminiModel

SIGNATURE = "c2lnbmF0dXJlLTE="


def model(url: str) -> GeminiModel:
    options = types.HttpOptions(base_url=url, retry_options=types.HttpRetryOptions(attempts=1))
    return GeminiModel("gemini-test", client=genai.Client(api_key="test-key", http_options=options))


async def test_multi_turn_run_replays_thought_signatures(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        gemini_stream(
            [
                {"text": "Two cities.", "thought": True},
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                    "thoughtSignature": SIGNATURE,
                },
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
            ]
        ),
        gemini_stream([{"text": "Sunny in both."}], usage=(44, 4)),
    )
    runner = sample_tools.runner(model(server.url), workspace)
    events = [event async for event in runner.stream("Weather?")]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Two cities."
    outcomes = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.result.content for o in outcomes] == ["Sunny in Paris", "Sunny in Rome"]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in both."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (62, 11)

    assert server.requests[0].path.endswith("/models/gemini-test:streamGenerateContent?alt=sse")
    first, second = server.bodies()
    assert first["systemInstruction"]["parts"] == [{"text": "You help."}]
    declarations = first["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["get_weather", "write_note"]
    assert first["contents"] == [{"role": "user", "parts": [{"text": "Weather?"}]}]
    model_turn, results = second["contents"][1:]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0] == {"text": "Two cities.", "thought": True}
    assert model_turn["parts"][1] == {
        "functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": SIGNATURE,
    }
    assert "thoughtSignature" not in model_turn["parts"][2]
    responses = [part["functionResponse"] for part in results["parts"]]
    assert [(r["name"], r["response"]) for r in responses] == [
        ("get_weather", {"output": "Sunny in Paris"}),
        ("get_weather", {"output": "Sunny in Rome"}),
    ]


def test_approval_pause_resumed_in_a_new_process(
    server: ScriptedServer, workspace: Path, tmp_path: Path
) -> None:
    call = {
        "functionCall": {"name": "write_note", "args": {"name": "g.txt", "text": "ok"}},
        "thoughtSignature": SIGNATURE,
    }
    server.add(gemini_stream([call]))
    paused = sample_tools.runner(model(server.url), workspace).run_sync("Write.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    server.add(gemini_stream([{"text": "Written."}]))
    decisions = [paused.pending[0].approve()]
    out = resume_in_subprocess("gemini", server.url, workspace, tmp_path, paused.state, decisions)
    assert out["output"] == "Written."
    assert (workspace / "g.txt").read_text() == "ok\n"
    replayed = server.bodies()[1]["contents"][1]["parts"][0]
    assert replayed["thoughtSignature"] == SIGNATURE  # survived the JSON state


async def test_a_turn_cut_off_by_max_tokens_runs_no_call(
    server: ScriptedServer, workspace: Path
) -> None:
    call = {"functionCall": {"name": "write_note", "args": {"name": "m", "text": "t"}}}
    server.add(gemini_stream([call], finish="MAX_TOKENS"))
    events = [e async for e in sample_tools.runner(model(server.url), workspace).stream("go")]
    assert not [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    assert events[-1].result.stop_reason is StopReason.MAX_TOKENS  # type: ignore[union-attr]


async def test_rate_limit(server: ScriptedServer, workspace: Path) -> None:
    server.add(gemini_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted"))
    with pytest.raises(RateLimitError, match="exhausted"):
        await sample_tools.runner(model(server.url), workspace).run("hi")
    assert len(server.requests) == 1


async def test_an_unreachable_server_is_a_connection_error(workspace: Path) -> None:
    # google-genai's transport is the httpx2 fork, whose errors are not httpx's classes:
    # they escaped the adapter raw before.
    from toolbridge.agent import ModelConnectionError

    gone = model("http://127.0.0.1:9")
    with pytest.raises(ModelConnectionError, match="cannot reach Gemini"):
        await sample_tools.runner(gone, workspace).run("hi")
