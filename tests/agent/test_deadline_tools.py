"""The run's deadline covers tool calls: a tool that never returns is cancelled when the
deadline passes, every call is answered, and the run stops with `DEADLINE`."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from toolbridge import ExecutionPolicy, OutcomeStatus, ToolCallRequest, tool
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    RunFinished,
    ScriptedModel,
    StopReason,
    ToolFinished,
    ToolResultsMessage,
)
from toolbridge.agent.turn_calls import TurnCalls

HANG_BOUND = 60.0  # only a real hang reaches it


async def test_a_hanging_tool_ends_at_the_run_deadline(workspace: Path) -> None:
    started = asyncio.Event()

    @tool(read_only=True)
    async def hang() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"  # pragma: no cover

    @tool(read_only=True)
    def quick() -> str:
        """Returns at once."""
        return "quick done"

    turn = AssistantMessage(
        calls=(ToolCallRequest("c1", "quick", "{}"), ToolCallRequest("c2", "hang", "{}"))
    )
    model = ScriptedModel([turn, AssistantMessage(text="unreachable")])
    runner = AgentRunner(
        model, [quick, hang], policy=ExecutionPolicy(persist_results=False), deadline=1.0
    )
    async with asyncio.timeout(HANG_BOUND):
        events = [event async for event in runner.stream("go")]
    assert started.is_set()
    finished = {e.outcome.call.id: e.outcome for e in events if isinstance(e, ToolFinished)}
    assert finished["c1"].status is OutcomeStatus.OK
    assert finished["c2"].status is OutcomeStatus.CANCELLED
    result = events[-1]
    assert isinstance(result, RunFinished)
    assert result.result.stop_reason is StopReason.DEADLINE
    results = result.result.conversation[-1]
    assert isinstance(results, ToolResultsMessage)  # every call answered: a valid history
    by_id = {ret.call.id: ret.result for ret in results.results}
    assert by_id["c1"].text == "quick done"
    assert by_id["c2"].is_error and "cancelled" in by_id["c2"].text
    assert len(model.requests) == 1  # the model was not asked again


async def test_a_blocking_sync_tool_is_abandoned_at_the_deadline(workspace: Path) -> None:
    release = threading.Event()

    @tool(read_only=True)
    def block() -> str:
        """Blocks its worker thread until released."""
        release.wait(HANG_BOUND)
        return "released"

    model = ScriptedModel([AssistantMessage(calls=(ToolCallRequest("c1", "block", "{}"),))])
    runner = AgentRunner(model, [block], policy=ExecutionPolicy(persist_results=False), deadline=1)
    try:
        async with asyncio.timeout(HANG_BOUND / 2):
            result = await runner.run("go")
    finally:
        release.set()
    assert result.stop_reason is StopReason.DEADLINE


class _LateCalls(TurnCalls):
    """The deadline passes between the model's answer and its calls (as a slow journal
    save can make it): the calls are cancelled before they start, and still answered."""

    async def run(self, run: Any, turn: int, calls: Any, early: Any = None) -> Any:
        assert run.deadline is not None
        left = run.remaining()
        assert left is not None
        await asyncio.sleep(max(left, 0) + 0.05)  # until the deadline itself has passed
        async for step in super().run(run, turn, calls, early):
            yield step


class _LateRunner(AgentRunner):
    """A runner whose turns' calls are reached only after the deadline (`_LateCalls`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._calls = _LateCalls(searching=False, answers=None)


async def test_calls_reached_after_the_deadline_are_answered_as_cancelled() -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def quick() -> str:
        """Returns at once."""
        ran.append("quick")
        return "quick done"

    model = ScriptedModel([AssistantMessage(calls=(ToolCallRequest("c1", "quick", "{}"),))])
    runner = _LateRunner(
        model, [quick], policy=ExecutionPolicy(persist_results=False), deadline=0.5
    )
    async with asyncio.timeout(HANG_BOUND):
        result = await runner.run("go")
    assert result.stop_reason is StopReason.DEADLINE and ran == []
    results = result.conversation[-1]
    assert isinstance(results, ToolResultsMessage)
    [ret] = results.results
    assert ret.call.id == "c1" and ret.result.is_error and "cancelled" in ret.result.text


async def test_calls_started_early_end_at_the_deadline_too() -> None:
    @tool(read_only=True)
    async def hang() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "never"  # pragma: no cover

    turn = AssistantMessage(calls=(ToolCallRequest("c1", "hang", "{}"),))
    model = ScriptedModel([turn, AssistantMessage(text="unreachable")])
    policy = ExecutionPolicy(persist_results=False)
    runner = AgentRunner(model, [hang], policy=policy, deadline=1.0, eager_tools=True)
    async with asyncio.timeout(HANG_BOUND):
        events = [event async for event in runner.stream("go")]
    finished = [e.outcome for e in events if isinstance(e, ToolFinished)]
    assert [o.status for o in finished] == [OutcomeStatus.CANCELLED]
    result = events[-1]
    assert isinstance(result, RunFinished)
    assert result.result.stop_reason is StopReason.DEADLINE
    results = result.result.conversation[-1]
    assert isinstance(results, ToolResultsMessage)
    assert results.results[0].result.is_error and len(model.requests) == 1
