"""A stream whose reader falls behind holds every start and finish, and of each call's
progress only the latest `MAX_PENDING_PROGRESS` reports not yet read, in order: a tool
reporting in a tight loop cannot fill memory (the bound a Ray worker keeps too)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolbridge import ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry, tool
from toolbridge.execution.outcomes import EventType
from toolbridge.execution.progress import MAX_PENDING_PROGRESS, report_progress

REPORTS = 20 * MAX_PENDING_PROGRESS


async def test_a_slow_reader_gets_each_calls_latest_progress_in_order(workspace: Path) -> None:
    reported = asyncio.Event()

    @tool(read_only=True, name="chatty")
    async def chatty(tag: str) -> str:
        """Report progress many times, faster than anyone reads it."""
        for step in range(1, REPORTS + 1):
            report_progress(step, REPORTS, f"{tag} {step}")
        await asyncio.sleep(0)  # the other call reports too before the reader reads
        reported.set()
        return tag

    executor = ToolExecutor(ToolRegistry([chatty], context=ToolContext(workspace=workspace)))
    calls = [ToolCallRequest(f"c-{tag}", "chatty", {"tag": tag}) for tag in ("a", "b")]
    stream = executor.stream(calls)
    first = await anext(stream)
    await reported.wait()  # every report was made while the reader did not read
    events = [first] + [event async for event in stream]

    kinds = [event.type for event in events]
    assert kinds.count(EventType.CALL_STARTED) == 2
    assert kinds.count(EventType.CALL_FINISHED) == 2
    for tag in ("a", "b"):
        steps = [
            event.progress.progress
            for event in events
            if event.type is EventType.CALL_PROGRESS
            and event.call.id == f"c-{tag}"
            and event.progress is not None
        ]
        # At most the bound (the reader may have taken a few before it fell behind),
        # the latest ones, in order.
        assert len(steps) <= MAX_PENDING_PROGRESS + 1, len(steps)
        assert steps == sorted(steps) and steps[-1] == REPORTS
        assert steps[-MAX_PENDING_PROGRESS:] == [
            float(step) for step in range(REPORTS - MAX_PENDING_PROGRESS + 1, REPORTS + 1)
        ]
    finished = [event.call.id for event in events if event.type is EventType.CALL_FINISHED]
    assert sorted(finished) == ["c-a", "c-b"]
