"""``eager_tools``: leading read-only calls start while the model still streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolRegistry, tool
from toolbridge.agent import (
    AgentRunner,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RunFinished,
    StopReason,
    ToolCallReady,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
    Usage,
)
from toolbridge.agent.events import ModelEvent


class SlowStream:
    """Streams turn one's calls; turn two answers. After each call it waits until the call
    ran (`early`: those that must start while the stream goes on; 30 s bound) or, for the
    others, gives a wrong early start a moment to show (a busy machine can only make that
    miss a bug, never fail a correct run)."""

    format = "openai_chat"
    model = "slow"

    def __init__(
        self, calls: list[ToolCallRequest], *, early: tuple[str, ...] = (), truncated: bool = False
    ) -> None:
        self.calls = calls
        self.early = early
        self.truncated = truncated
        self.log: list[str] = []

    async def _ran(self, call: ToolCallRequest) -> None:
        end = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < end:
            if any(line.endswith(f" {call.id}") for line in self.log):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"call {call.id} did not start while the model streamed")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.turn > 1:
            yield ModelResponse(AssistantMessage(text="done"), Usage())
            return
        for call in self.calls:
            yield ToolCallReady(call, request.turn)
            if call.id in self.early:
                await self._ran(call)
            else:
                await asyncio.sleep(0.05)
            self.log.append(f"streamed {call.id}")
        message = AssistantMessage(
            calls=tuple(self.calls), truncated=self.truncated, finish_reason="length"
        )
        yield ModelResponse(message, Usage())


def registry(log: list[str]) -> ToolRegistry:
    @tool(read_only=True)
    async def look(key: str) -> str:
        """Read something."""
        log.append(f"look {key}")
        return key

    @tool
    def change(key: str) -> str:
        """Change something."""
        log.append(f"change {key}")
        return key

    return ToolRegistry([look, change])


def call(call_id: str, name: str) -> ToolCallRequest:
    return ToolCallRequest(call_id, name, json.dumps({"key": call_id}))


async def test_leading_read_only_calls_start_during_the_stream(workspace: Path) -> None:
    model = SlowStream(
        [call("a", "look"), call("b", "look"), call("c", "change"), call("d", "look")],
        early=("a", "b"),
    )
    runner = AgentRunner(
        model,
        registry(model.log),
        eager_tools=True,
        policy=ExecutionPolicy(persist_results=False),
    )
    events = [event async for event in runner.stream("go")]
    # a and b ran while the stream went on; c (a write) and d (after it) waited
    assert model.log[:3] == ["look a", "streamed a", "look b"]
    assert model.log.index("change c") > model.log.index("streamed d")
    assert model.log.index("look d") > model.log.index("change c")
    started = [e.call.id for e in events if isinstance(e, ToolStarted)]
    assert started == ["a", "b", "c", "d"]
    result = events[-1].result  # type: ignore[union-attr]
    results = result.conversation[2]
    assert isinstance(results, ToolResultsMessage)
    assert [r.call.id for r in results.results] == ["a", "b", "c", "d"]
    assert [r.result.content for r in results.results] == ["a", "b", "c", "d"]


async def test_a_cut_off_turn_keeps_what_ran_and_runs_nothing_else(workspace: Path) -> None:
    model = SlowStream([call("a", "look"), call("b", "change")], early=("a",), truncated=True)
    runner = AgentRunner(model, registry(model.log), eager_tools=True)
    result = await runner.run("go")
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert "change b" not in model.log
    last = result.conversation[-1]
    assert isinstance(last, ToolResultsMessage)
    assert last.results[0].result.content == "a"  # complete and read-only: it ran
    assert "cut off" in last.results[1].result.text
    assert result.tool_calls == 1


def test_eager_tools_is_off_with_a_call_budget() -> None:
    model = SlowStream([])
    assert not AgentRunner(model, eager_tools=True, max_tool_calls=5).eager_tools
    assert AgentRunner(model, eager_tools=True).eager_tools


class GatedStream:
    """Streams call `a`, then waits (up to 30 s) until the consumer saw `a` finish before it
    streams call `b` and ends the turn; turn two answers."""

    format = "openai_chat"
    model = "gated"

    def __init__(self, seen_a_finish: asyncio.Event) -> None:
        self.seen_a_finish = seen_a_finish
        self.released_during_stream = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.turn > 1:
            yield ModelResponse(AssistantMessage(text="done"), Usage())
            return
        calls = (call("a", "fast"), call("b", "slow"), call("c", "fast"))
        yield ToolCallReady(calls[0], request.turn)
        try:
            await asyncio.wait_for(self.seen_a_finish.wait(), 30)
            self.released_during_stream = True
        except TimeoutError:
            pass  # finishes not live: the assertions below say so
        for item in calls[1:]:
            yield ToolCallReady(item, request.turn)
        yield ModelResponse(AssistantMessage(calls=calls), Usage())


async def test_early_calls_finish_live_and_results_stay_in_call_order(workspace: Path) -> None:
    seen_a, seen_c = asyncio.Event(), asyncio.Event()

    @tool(read_only=True)
    async def fast(key: str) -> str:
        """Returns at once."""
        return key

    @tool(read_only=True)
    async def slow(key: str) -> str:
        """Returns once the consumer saw `c` (started after it) finish, or after 30 s."""
        try:
            await asyncio.wait_for(seen_c.wait(), 30)
        except TimeoutError:
            return "late"
        return key

    model = GatedStream(seen_a)
    runner = AgentRunner(
        model,
        ToolRegistry([fast, slow]),
        eager_tools=True,
        policy=ExecutionPolicy(persist_results=False),
    )
    order: list[str] = []
    result = None
    async for event in runner.stream("go"):
        if isinstance(event, ToolFinished):
            order.append(event.outcome.call.id)
            {"a": seen_a, "c": seen_c}.get(event.outcome.call.id, asyncio.Event()).set()
        elif isinstance(event, RunFinished):
            result = event.result
    # `a` finished while the model was still streaming, and `c` before `b`, which
    # started earlier and ended only after `c` was reported.
    assert model.released_during_stream
    assert order == ["a", "c", "b"]
    assert result is not None
    results = result.conversation[2]
    assert isinstance(results, ToolResultsMessage)
    assert [r.call.id for r in results.results] == ["a", "b", "c"]
    assert [r.result.content for r in results.results] == ["a", "b", "c"]
