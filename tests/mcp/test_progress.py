"""`report_progress`: a tool's progress reaches the executor's listeners as events."""

from __future__ import annotations

import asyncio
import logging

import pytest

from toolbridge import (
    EventType,
    ToolCallRequest,
    ToolEvent,
    ToolExecutor,
    ToolProgress,
    ToolRegistry,
    report_progress,
    tool,
)
from toolbridge.execution.progress import progress_sink


@tool(read_only=True)
async def count(n: int) -> str:
    """Count to n, reporting each step."""
    for i in range(1, n + 1):
        report_progress(i, n, f"at {i}")
        await asyncio.sleep(0)
    return "counted"


async def test_progress_becomes_events_of_the_right_call() -> None:
    events: list[ToolEvent] = []
    executor = ToolExecutor(ToolRegistry([count]), listeners=[events.append])
    first, second = ToolCallRequest("a", "count", {"n": 2}), ToolCallRequest("b", "count", {"n": 1})
    await executor.run([first, second])  # read-only: they run together
    progress = [(e.call.id, e.progress) for e in events if e.type is EventType.CALL_PROGRESS]
    assert sorted(progress, key=lambda item: item[0]) == [
        ("a", ToolProgress(1, 2, "at 1")),
        ("a", ToolProgress(2, 2, "at 2")),
        ("b", ToolProgress(1, 1, "at 1")),
    ]


async def test_progress_reaches_events_and_the_surrounding_sink() -> None:
    seen: list[ToolProgress] = []
    events: list[ToolEvent] = []
    with progress_sink(seen.append):
        # an executor with listeners makes events and passes the reports on
        await ToolExecutor(ToolRegistry([count]), listeners=[events.append]).run(
            [ToolCallRequest("a", "count", {"n": 2})]
        )
        assert seen == [ToolProgress(1, 2, "at 1"), ToolProgress(2, 2, "at 2")]
        assert len([e for e in events if e.type is EventType.CALL_PROGRESS]) == 2
        report_progress(5, 10)  # outside any call: the surrounding sink gets it
    assert seen[-1] == ToolProgress(5, 10)
    report_progress(1)  # no sink at all: a no-op


def test_a_failing_sink_does_not_fail_the_reporter(caplog: pytest.LogCaptureFixture) -> None:
    received: list[ToolProgress] = []

    def broken(progress: ToolProgress) -> None:
        received.append(progress)
        raise RuntimeError("listener bug")

    with (
        caplog.at_level(logging.ERROR, logger="toolbridge.execution.progress"),
        progress_sink(broken),
    ):
        report_progress(1, 2)  # returns: the listener's bug is not the tool's
    assert received == [ToolProgress(1, 2)]  # the sink was called
    [record] = [r for r in caplog.records if r.name == "toolbridge.execution.progress"]
    assert "progress sink" in record.getMessage() and record.exc_info is not None
    assert "listener bug" in str(record.exc_info[1])  # logged with its traceback, not lost
