"""Two calls sharing an id in one model turn: each gets its own result (the second a
refusal), in call order, with and without eager tool starts; never the other's result."""

from __future__ import annotations

import pytest

from toolbridge import ExecutionPolicy, ToolCallRequest, tool
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    ScriptedModel,
    StopReason,
    ToolResultsMessage,
)


@pytest.mark.parametrize("eager", [False, True])
async def test_each_call_gets_its_own_result(eager: bool) -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def echo(text: str) -> str:
        """Return the text."""
        ran.append(text)
        return f"echo {text}"

    turn = AssistantMessage(
        calls=(
            ToolCallRequest("c1", "echo", '{"text": "first"}'),
            ToolCallRequest("c1", "echo", '{"text": "second"}'),
        )
    )
    model = ScriptedModel([turn, AssistantMessage(text="done")])
    runner = AgentRunner(
        model, [echo], policy=ExecutionPolicy(persist_results=False), eager_tools=eager
    )
    result = await runner.run("go")
    assert result.stop_reason is StopReason.FINAL
    assert ran == ["first"]
    results = result.conversation[-2]
    assert isinstance(results, ToolResultsMessage)
    first, second = results.results
    assert first.call is turn.calls[0] and first.result.text == "echo first"
    assert second.call is turn.calls[1] and second.result.is_error
    assert "already used by call 1" in second.result.text
    # what the model is told: the real result, then the refusal, never the same text twice
    sent = [m for m in model.requests[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in sent] == ["c1", "c1"]
    assert sent[0]["content"] == "echo first" and "already used" in sent[1]["content"]
