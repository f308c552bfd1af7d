"""The OpenAI Chat Completions adapter: the real ``openai`` SDK against a scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from tests.agent import sample_tools
from tests.agent.resume_child import resume_in_subprocess
from tests.agent.scripted_server import (
    ScriptedServer,
    ollama_stream,
    openai_chat_stream,
    openai_error,
)

from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    ContextLengthError,
    ModelAuthenticationError,
    RateLimitError,
    RunFinished,
    StopReason,
    TextDelta,
    ToolCallReady,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    TurnFinished,
    UserMessage,
    message_to_json,
)
from toolbridge.agent.adapters import OpenAIChatModel

REPO = Path(__file__).resolve().parents[2]


def model(server: ScriptedServer) -> OpenAIChatModel:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
    return OpenAIChatModel("gpt-test", client=client)


async def test_multi_turn_run_with_parallel_calls(server: ScriptedServer, workspace: Path) -> None:
    server.add(
        openai_chat_stream(
            text="Checking both.",
            calls=[
                ("call_a", "get_weather", '{"city": "Paris"}'),
                ("call_b", "get_weather", '{"city": "Rome"}'),
            ],
        ),
        openai_chat_stream(text="Sunny in both.", usage=(40, 5)),
    )
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("Weather in Paris and Rome?")]

    kinds = [type(event).__name__ for event in events]
    assert kinds[-1] == "RunFinished"
    assert kinds.count("TurnFinished") == 2
    ready = [e.call.id for e in events if isinstance(e, ToolCallReady)]
    assert ready == ["call_a", "call_b"]
    finished = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.result.content for o in finished] == ["Sunny in Paris", "Sunny in Rome"]
    # the tools ran after their calls were assembled and before the turn finished
    assert kinds.index("ToolStarted") > kinds.index("ToolCallReady")
    assert kinds.index("ToolFinished") < kinds.index("TurnFinished")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "Checking both.Sunny in both."
    )
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.FINAL
    assert result.output == "Sunny in both."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (52, 12)
    assert result.usage.requests == 2

    first, second = server.bodies()
    assert first["stream"] is True and first["model"] == "gpt-test"
    assert first["messages"] == [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
    ]
    tool_names = [tool["function"]["name"] for tool in first["tools"]]
    assert tool_names == ["get_weather", "write_note"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assert second["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "Sunny in Paris"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Sunny in Rome"},
    ]
    assert second["tools"] == first["tools"]


@pytest.mark.parametrize("approve", [True, False])
def test_approval_pause_resumed_in_a_new_process(
    server: ScriptedServer, workspace: Path, tmp_path: Path, approve: bool
) -> None:
    server.add(
        openai_chat_stream(
            calls=[
                ("call_w", "write_note", '{"name": "a.txt", "text": "hello"}'),
                ("call_x", "get_weather", '{"city": "Oslo"}'),
            ]
        )
    )
    runner = sample_tools.runner(model(server), workspace)
    paused = runner.run_sync("Note it down.")
    assert paused.stop_reason is StopReason.APPROVAL_REQUIRED
    assert [(p.call.id, p.tool_name, dict(p.arguments)) for p in paused.pending] == [
        ("call_w", "write_note", {"name": "a.txt", "text": "hello"})
    ]
    assert not (workspace / "a.txt").exists()  # nothing ran before the decision

    decision = paused.pending[0].approve() if approve else paused.pending[0].deny("not today")
    server.add(openai_chat_stream(text="Done."))
    out = resume_in_subprocess(
        "openai_chat", server.url, workspace, tmp_path, paused.state, [decision]
    )
    assert out["stop_reason"] == "final" and out["output"] == "Done."
    resumed = server.bodies()[1]["messages"]
    results = [m for m in resumed if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == ["call_w", "call_x"]
    assert results[1]["content"] == "Sunny in Oslo"
    if approve:
        assert (workspace / "a.txt").read_text() == "hello\n"
        assert results[0]["content"] == "wrote 5 characters to a.txt"
    else:
        assert not (workspace / "a.txt").exists()
        assert results[0]["content"].startswith("Error")
        assert "not today" in results[0]["content"]


async def test_a_turn_cut_off_by_max_tokens_runs_no_call(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        openai_chat_stream(
            calls=[("call_1", "get_weather", '{"city": "Par')],
            finish="length",
        )
    )
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("Weather?")]
    assert not [e for e in events if isinstance(e, ToolStarted | ToolFinished)]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.stop_reason is StopReason.MAX_TOKENS
    cut, answered = result.conversation[-2:]
    assert isinstance(cut, AssistantMessage) and cut.truncated
    assert cut.calls[0].arguments == '{"city": "Par'
    assert isinstance(answered, ToolResultsMessage)
    assert answered.results[0].result.is_error
    assert "cut off" in answered.results[0].result.text


async def test_max_tokens_setting_is_sent(server: ScriptedServer, workspace: Path) -> None:
    from toolbridge.agent import ModelSettings

    server.add(openai_chat_stream(text="ok"))
    runner = sample_tools.runner(
        model(server), workspace, settings=ModelSettings(max_tokens=64, temperature=0.0)
    )
    await runner.run("hi")
    body = server.bodies()[0]
    assert body["max_completion_tokens"] == 64 and body["temperature"] == 0.0


async def test_rate_limit_keeps_the_conversation_and_resumes(
    server: ScriptedServer, workspace: Path
) -> None:
    server.add(
        openai_chat_stream(calls=[("call_1", "get_weather", '{"city": "Lima"}')]),
        openai_error(429, "Rate limit reached for requests", "rate_limit_exceeded"),
    )
    runner = sample_tools.runner(model(server), workspace)
    with pytest.raises(RateLimitError) as info:
        await runner.run("Weather in Lima?")
    error = info.value
    assert error.status == 429
    assert "Rate limit reached" in str(error)
    assert len(server.requests) == 2  # max_retries=0: the SDK did not retry
    assert [m.role for m in error.conversation] == ["user", "assistant", "tool"]
    assert error.state is not None
    saved = json.dumps(error.state.to_json())

    from toolbridge.agent import RunState

    server.add(openai_chat_stream(text="Sunny in Lima."))
    result = await runner.run(RunState.from_json(saved))
    assert result.stop_reason is StopReason.FINAL and result.output == "Sunny in Lima."
    assert server.bodies()[2]["messages"] == server.bodies()[1]["messages"]


@pytest.mark.parametrize(
    ("reply", "error_type"),
    [
        (
            openai_error(
                400,
                "This model's maximum context length is 8192 tokens.",
                "context_length_exceeded",
            ),
            ContextLengthError,
        ),
        (
            openai_error(401, "Incorrect API key provided", "invalid_api_key"),
            ModelAuthenticationError,
        ),
    ],
)
async def test_model_errors_are_typed(
    server: ScriptedServer, workspace: Path, reply: object, error_type: type[Exception]
) -> None:
    server.add(reply)  # type: ignore[arg-type]
    runner = sample_tools.runner(model(server), workspace)
    with pytest.raises(error_type) as info:
        await runner.run("hi")
    assert [message_to_json(m) for m in info.value.conversation] == [  # type: ignore[attr-defined]
        message_to_json(UserMessage("hi"))
    ]


async def test_provider_strings_build_clients_from_the_environment(
    server: ScriptedServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    server.add(openai_chat_stream(text="from openai"), ollama_stream(text="from ollama"))
    openai_runner = AgentRunner("openai:gpt-4.1-mini", sample_tools.registry(workspace))
    assert (await openai_runner.run("hi")).output == "from openai"
    ollama_runner = AgentRunner("ollama:qwen3", sample_tools.registry(workspace))
    assert (await ollama_runner.run("hi")).output == "from ollama"
    assert [r.body["model"] for r in server.requests] == ["gpt-4.1-mini", "qwen3"]
    assert server.requests[0].headers["authorization"] == "Bearer env-key"
    assert [r.path for r in server.requests] == ["/v1/chat/completions", "/api/chat"]


def test_a_bad_provider_string_says_what_is_expected() -> None:
    with pytest.raises(ValueError, match="'provider:model'"):
        AgentRunner("gpt-4")
    with pytest.raises(ValueError, match="unknown model provider 'acme'"):
        AgentRunner("acme:model")


async def test_turn_events_carry_usage(server: ScriptedServer, workspace: Path) -> None:
    server.add(openai_chat_stream(text="hi", usage=(3, 2)))
    runner = sample_tools.runner(model(server), workspace)
    events = [event async for event in runner.stream("hi")]
    turn = next(e for e in events if isinstance(e, TurnFinished))
    assert (turn.usage.input_tokens, turn.usage.output_tokens) == (3, 2)
    assert isinstance(events[-1], RunFinished)
