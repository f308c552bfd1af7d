"""`report_progress`: a tool's progress reaches the executor's listeners as events."""

from __future__ import annotations

import asyncio
import logging
import threading

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


@tool(read_only=True)
def count_sync(n: int) -> str:
    """Count to n from a worker thread (a sync tool), reporting each step."""
    for i in range(1, n + 1):
        report_progress(i, n)
    return "counted"


async def test_a_sync_tools_progress_comes_on_the_loop_between_its_start_and_end() -> None:
    """A sync tool reports from its worker thread: the listeners and the surrounding sink
    still hear it on the loop (an MCP server's relay needs the running loop), after the
    call's start and before its end."""
    loop_thread = threading.get_ident()
    events: list[tuple[str, EventType, bool]] = []
    relayed: list[ToolProgress] = []

    def heard(event: ToolEvent) -> None:
        events.append((event.call.id, event.type, threading.get_ident() == loop_thread))

    def relay(progress: ToolProgress) -> None:
        asyncio.get_running_loop()  # as the MCP server's relay: only on the loop
        relayed.append(progress)

    calls = [ToolCallRequest(str(n), "count_sync", {"n": 3}) for n in range(8)]
    with progress_sink(relay):
        await ToolExecutor(ToolRegistry([count_sync]), listeners=[heard]).run(calls)
    assert all(on_loop for *_, on_loop in events)
    progress = [EventType.CALL_PROGRESS] * 3
    for call in calls:
        kinds = [kind for call_id, kind, _ in events if call_id == call.id]
        assert kinds == [EventType.CALL_STARTED, *progress, EventType.CALL_FINISHED], call.id
    assert len(relayed) == 24


async def test_progress_reported_after_its_call_ended_is_dropped() -> None:
    """A task the tool left running reports after the call's outcome: its listeners have
    heard the call end, so they hear nothing more of it (as on Ray)."""
    later = asyncio.Event()
    left: list[asyncio.Task[None]] = []

    async def report_later() -> None:
        await later.wait()
        report_progress(2, 2)

    @tool(read_only=True)
    async def leaves_a_task() -> str:
        """Report once, and leave a task that reports after the call returned."""
        report_progress(1, 2)
        left.append(asyncio.get_running_loop().create_task(report_later()))
        return "returned"

    events: list[ToolEvent] = []
    relayed: list[ToolProgress] = []
    with progress_sink(relayed.append):
        await ToolExecutor(ToolRegistry([leaves_a_task]), listeners=[events.append]).run(
            [ToolCallRequest("a", "leaves_a_task", {})]
        )
        later.set()
        await left[0]
    assert [e.type for e in events] == [
        EventType.CALL_STARTED,
        EventType.CALL_PROGRESS,
        EventType.CALL_FINISHED,
    ]
    assert relayed == [ToolProgress(1, 2)]


def test_a_report_is_bounded_as_it_is_made() -> None:
    from toolbridge.execution.progress import MAX_PROGRESS_MESSAGE

    whole = "y" * MAX_PROGRESS_MESSAGE
    assert ToolProgress(1, None, whole).message == whole  # at the bound: kept whole
    cut = ToolProgress(1, None, whole + "y").message
    assert cut is not None and len(cut) == MAX_PROGRESS_MESSAGE
    assert cut.endswith(f" ... [progress message cut: {MAX_PROGRESS_MESSAGE + 1:,} characters]")
    assert ToolProgress(1, None, cut).message == cut  # made again (a Ray caller): the same
    assert ToolProgress(1, None, 42).message == "42"  # type: ignore[arg-type]
    assert ToolProgress(True, 10**300).total == 1e300
    for total in (float("nan"), float("-inf"), 10**400, "10"):
        assert ToolProgress(1, total).total is None  # type: ignore[arg-type]
    for progress in (float("nan"), float("inf"), 10**5000, "5", None):
        with pytest.raises(ValueError, match="progress must be a finite number"):
            ToolProgress(progress)  # type: ignore[arg-type]


def test_a_report_with_no_finite_progress_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[ToolProgress] = []
    with (
        caplog.at_level(logging.DEBUG, logger="toolbridge.execution.progress"),
        progress_sink(seen.append),
    ):
        report_progress(float("nan"), 2, "lost")
        report_progress(1, float("inf"), "kept")
    assert seen == [ToolProgress(1.0, None, "kept")]
    assert any("progress report dropped" in r.getMessage() for r in caplog.records)
