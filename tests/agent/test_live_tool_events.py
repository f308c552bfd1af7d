"""`ToolStarted` / `ToolFinished` are yielded as each call starts and finishes, not after
the whole batch; the conversation still gets the results in call order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolRegistry, tool
from toolbridge.agent import (
    AgentEvent,
    AgentRunner,
    AssistantMessage,
    RunFinished,
    ScriptedModel,
    ToolFinished,
    ToolResultsMessage,
    ToolStarted,
)
from toolbridge.execution.executor import ToolExecutor
from toolbridge.execution.outcomes import EventType, ToolEvent

POLICY = ExecutionPolicy(persist_results=False)


def tool_events(events: list[AgentEvent]) -> list[tuple[str, str]]:
    out = []
    for event in events:
        if isinstance(event, ToolStarted):
            out.append(("started", event.call.id))
        elif isinstance(event, ToolFinished):
            out.append(("finished", event.outcome.call.id))
    return out


async def test_a_call_that_finishes_first_is_reported_first(workspace: Path) -> None:
    fast_done = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Finishes only after the executor reported `fast` finished."""
        await fast_done.wait()
        return "slow"

    @tool(read_only=True)
    async def fast() -> str:
        """Finishes at once."""
        return "fast"

    def listen(event: ToolEvent) -> None:
        if event.type is EventType.CALL_FINISHED and event.call.name == "fast":
            fast_done.set()

    registry = ToolRegistry([slow, fast], context=ToolContext(workspace=workspace))
    model = ScriptedModel(
        [
            AssistantMessage(
                calls=(ToolCallRequest("s", "slow", {}), ToolCallRequest("f", "fast", {}))
            ),
            AssistantMessage(text="Done."),
        ]
    )
    runner = AgentRunner(
        model,
        registry,
        policy=POLICY,
        executor_factory=lambda r: ToolExecutor(r, POLICY, listeners=[listen]),
    )
    events = [event async for event in runner.stream("go")]
    seen = tool_events(events)
    assert seen.index(("finished", "f")) < seen.index(("finished", "s"))
    assert sorted(seen) == [
        ("finished", "f"), ("finished", "s"), ("started", "f"), ("started", "s"),
    ]  # fmt: skip
    for call_id in "sf":
        assert seen.index(("started", call_id)) < seen.index(("finished", call_id))
    final = events[-1]
    assert isinstance(final, RunFinished) and final.result.output == "Done."
    [results] = [m for m in final.result.conversation if isinstance(m, ToolResultsMessage)]
    assert [(r.call.id, r.result.text) for r in results.results] == [("s", "slow"), ("f", "fast")]


async def test_calls_settled_without_running_are_still_started_then_finished(
    workspace: Path,
) -> None:
    @tool(requires_approval=True)
    def remove(path: str) -> str:
        """Needs approval."""
        return f"removed {path}"

    registry = ToolRegistry([remove], context=ToolContext(workspace=workspace))
    model = ScriptedModel([
        AssistantMessage(calls=(
            ToolCallRequest("bad", "remove", {"path": 3, "extra": True}),
            ToolCallRequest("ask", "remove", {"path": "a"}),
        )),
        AssistantMessage(text="Removed."),
    ])  # fmt: skip
    runner = AgentRunner(model, registry, policy=POLICY)
    events = [event async for event in runner.stream("go")]
    assert tool_events(events) == [
        ("started", "bad"), ("finished", "bad"), ("started", "ask"), ("finished", "ask"),
    ]  # fmt: skip
    paused = events[-1]
    assert isinstance(paused, RunFinished)
    [pending] = paused.result.pending
    resumed = [
        event async for event in runner.stream(paused.result.state, decisions=[pending.approve()])
    ]
    assert tool_events(resumed) == [("started", "ask"), ("finished", "ask")]
    finished = [e for e in resumed if isinstance(e, ToolFinished)]
    assert finished[0].outcome.result.text == "removed a"


async def test_closing_the_stream_cancels_the_running_call(workspace: Path) -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    @tool(read_only=True)
    async def forever() -> str:
        """Never finishes on its own."""
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    registry = ToolRegistry([forever], context=ToolContext(workspace=workspace))
    model = ScriptedModel([AssistantMessage(calls=(ToolCallRequest("x", "forever", {}),))])
    stream = AgentRunner(model, registry, policy=POLICY).stream("go")
    async for event in stream:
        if isinstance(event, ToolStarted):
            await asyncio.wait_for(entered.wait(), 60)  # the call runs while we hold the event
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert cancelled.is_set()
