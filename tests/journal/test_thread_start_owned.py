"""A sync call's start belongs to that call, and the journal agrees with what ran.

- Its time limit, or a stop, may land while the loop records the start the call's thread
  asked for: the function then never runs, so its row has no start, the call is queued
  again (sending it again runs it) and the text says it did not run.
- The function may drive an executor of its own (`asyncio.run` in its thread): that
  executor's calls never use the outer call's start (they inherit the thread's context).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from tests.journal.waiting import until

from toolbridge import (
    ErrorKind,
    EventType,
    ExecutionPolicy,
    Tool,
    ToolCallRequest,
    ToolContext,
    ToolEvent,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import CallJournal, CallKey, CallState, open_journal


class LoopHeld(ThreadPoolExecutor):
    """One worker thread. The first call handed to it holds the loop that hands it over
    until `reached` is set (from the thread): what the thread does until then comes before
    anything that loop would have done meanwhile (a time limit's end, a posted callback)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="held")
        self.reached = threading.Event()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        assert self.reached.wait(30), "the worker thread never got there"
        return future


class HeldStart:
    """`journal.start` held until `release`, before its write or (`written`) after it: the
    loop is recording a call's start."""

    def __init__(self, journal: CallJournal, *, written: bool) -> None:
        self.asked = False
        self.release = asyncio.Event()
        start = journal.start

        async def held(key: CallKey) -> None:
            self.asked = True
            if not written:
                await self.release.wait()
            await start(key)
            if written:
                await self.release.wait()

        journal.start = held  # type: ignore[method-assign]


def executor(
    workspace: Path, session: str, journal: CallJournal | None, events: list[Any], *tools: Tool
) -> ToolExecutor:
    registry = ToolRegistry(tools, context=ToolContext(workspace=workspace, session=session))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)

    def heard(event: ToolEvent) -> None:
        events.append((event.type, event.call.id, threading.get_ident()))

    return ToolExecutor(registry, policy, journal=journal, listeners=[heard])


@pytest.mark.parametrize("written", [False, True], ids=["before-its-write", "after-its-write"])
@pytest.mark.parametrize("end", ["time-limit", "stop"])
async def test_a_run_ending_while_a_sync_calls_start_is_recorded_leaves_it_unstarted(
    workspace: Path, journal_target: str, written: bool, end: str
) -> None:
    loop = asyncio.get_running_loop()
    pool = LoopHeld()  # the thread's ask is on the loop before the limit can end there
    loop.set_default_executor(pool)
    post = loop.call_soon_threadsafe

    def posted(*args: Any, **kwargs: Any) -> asyncio.Handle:
        handle = post(*args, **kwargs)
        if threading.current_thread().name.startswith("held"):
            pool.reached.set()
        return handle

    loop.call_soon_threadsafe = posted  # type: ignore[method-assign]
    ran: list[str] = []

    @tool(read_only=True, timeout=0.1 if end == "time-limit" else None)
    def quick() -> str:
        """Return at once."""
        ran.append("quick")
        return "done"

    call = ToolCallRequest("q", "quick", {})
    events: list[Any] = []
    async with await open_journal(journal_target) as journal:
        held = HeldStart(journal, written=written)
        run = asyncio.ensure_future(executor(workspace, "s", journal, events, quick).run([call]))
        await until(lambda: held.asked, "the call's thread never asked for its start")
        if end == "stop":
            run.cancel()
        # The limit ended (or the stop came) while the start is held: the thread was told
        # no, so it is free again, without running the function.
        await loop.run_in_executor(pool, str)
        held.release.set()
        if end == "stop":
            with pytest.raises(asyncio.CancelledError):
                await run
        else:
            [outcome] = await run
            assert outcome.error is not None and outcome.error.kind is ErrorKind.TIMEOUT
            assert "did not start" in outcome.result.text, outcome.result.text
        [row] = await journal.entries(session="s")
        assert ran == []
        assert EventType.CALL_STARTED not in [kind for kind, *_ in events]
        # It never ran: no start in its row, queued again, so sending it again runs it.
        assert (row.state, row.started_at, row.attempt) == (CallState.QUEUED, None, 1)
        [again] = await executor(workspace, "s", journal, [], quick).run([call])
        [row] = await journal.entries(session="s")
    assert (again.result.text, ran) == ("done", ["quick"])
    assert (row.state, row.attempt) == (CallState.FINISHED, 1) and row.started_at is not None


async def test_an_executor_driven_by_a_sync_tool_never_uses_that_calls_start(
    workspace: Path, journal_target: str
) -> None:
    loop = asyncio.get_running_loop()
    pool = LoopHeld()  # the outer loop waits while the tool drives its own executor
    loop.set_default_executor(pool)
    inner_events: list[Any] = []
    inner_rows: dict[str, tuple[CallState, bool]] = {}

    @tool(read_only=True)
    def double(n: int) -> int:
        """A sync tool of the inner executor."""
        return 2 * n

    @tool(read_only=True, timeout=0.05)
    async def stuck() -> str:
        """An async tool of the inner executor that never ends: its limit ends it."""
        await asyncio.Event().wait()
        return "never"

    async def inner_run() -> list[str]:
        async with await open_journal(journal_target) as journal:
            inner = executor(workspace, "inner", journal, inner_events, double, stuck)
            calls = [ToolCallRequest("i0", "double", {"n": 2}), ToolCallRequest("i1", "stuck", {})]
            outcomes = await inner.run(calls)
            for entry in await journal.entries(session="inner"):
                inner_rows[entry.key.call_id] = (entry.state, entry.started_at is not None)
        return [outcome.result.text for outcome in outcomes]

    @tool(read_only=True)
    def drive() -> str:
        """Drive an executor of its own, on a loop of its own, in this thread."""
        try:
            texts = asyncio.run(inner_run())
        finally:
            pool.reached.set()
        return f"{texts[0]} / {texts[1]}"

    outer_events: list[Any] = []
    outer = executor(workspace, "outer", None, outer_events, drive)
    [outcome] = await outer.run([ToolCallRequest("o", "drive", {})])
    here = threading.get_ident()
    assert outcome.result.text.startswith("4 / "), outcome.result.text
    assert "did not finish within its time limit" in outcome.result.text
    # The outer call started once, heard on its own loop, and then finished.
    started, finished = EventType.CALL_STARTED, EventType.CALL_FINISHED
    assert outer_events == [(started, "o", here), (finished, "o", here)]
    [thread] = {ident for *_, ident in inner_events}
    assert thread != here
    for call_id in ("i0", "i1"):
        kinds = [kind for kind, seen, _ in inner_events if seen == call_id]
        assert kinds == [EventType.CALL_STARTED, EventType.CALL_FINISHED], (call_id, kinds)
    assert inner_rows == {"i0": (CallState.FINISHED, True), "i1": (CallState.FINISHED, True)}
