"""A sync tool's call starts when a worker thread runs it, not when it is handed to the
pool: with more calls than threads the rest wait in the pool's queue. The journal marks a
call running only then; a stop lets go of the calls no thread ran (queued again) instead
of leaving them interrupted, to be approved again."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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
    ToolOutcome,
    ToolRegistry,
    tool,
)
from toolbridge.journal import CallJournal, CallState, open_journal


class Held:
    """A sync tool that holds its worker thread until released, noting which calls ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered: list[int] = []
        self.returned: list[int] = []

        @tool(read_only=True)
        def hold(n: int) -> int:
            """Hold the thread until released."""
            self.entered.append(n)
            assert self.release.wait(30), "never released"
            self.returned.append(n)
            return n

        self.tool = hold


def one_thread() -> None:
    """Give the running loop one worker thread, so the second call waits for the first."""
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))


def executor(
    workspace: Path,
    held: Held,
    journal: CallJournal | None,
    events: list[ToolEvent] | None,
    *others: Tool,
) -> ToolExecutor:
    """Listeners into `events` (None: nobody listens)."""
    tools = [held.tool, *others]
    registry = ToolRegistry(tools, context=ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    listeners = [events.append] if events is not None else []
    return ToolExecutor(registry, policy, journal=journal, listeners=listeners)


CALLS = [ToolCallRequest(f"c{n}", "hold", {"n": n}) for n in range(3)]


async def states(journal: CallJournal) -> dict[str, CallState]:
    return {entry.key.call_id: entry.state for entry in await journal.entries(session="s")}


async def test_sync_calls_waiting_for_a_thread_are_queued_until_one_runs_them(
    workspace: Path,
) -> None:
    one_thread()
    held = Held()
    async with await open_journal(str(workspace / "j.sqlite3")) as journal:
        run = asyncio.ensure_future(executor(workspace, held, journal, []).run(CALLS))
        await until(lambda: held.entered == [0], "the first call never ran")
        seen = await states(journal)
        held.release.set()
        outcomes: list[ToolOutcome] = await run
        assert [outcome.result.text for outcome in outcomes] == ["0", "1", "2"]
        # Handed to the pool together, but only one thread: the others had not started.
        assert seen == {"c0": CallState.RUNNING, "c1": CallState.QUEUED, "c2": CallState.QUEUED}
        assert set((await states(journal)).values()) == {CallState.FINISHED}
        assert all(e.attempt == 1 for e in await journal.entries(session="s"))


async def test_a_stop_lets_go_of_the_sync_calls_no_thread_ran(workspace: Path) -> None:
    one_thread()
    held = Held()
    async with await open_journal(str(workspace / "j.sqlite3")) as journal:
        run = asyncio.ensure_future(executor(workspace, held, journal, []).run(CALLS))
        await until(lambda: held.entered == [0], "the first call never ran")
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        seen = await states(journal)
        held.release.set()
        # The first may have partly run; the others never started: queued again, so the
        # next run runs them as the same attempt without asking anyone.
        assert seen == {
            "c0": CallState.INTERRUPTED,
            "c1": CallState.QUEUED,
            "c2": CallState.QUEUED,
        }
        await until(lambda: held.returned == [0], "the first call never returned")
    assert held.entered == [0]  # no thread ran the calls let go of, even later


@pytest.mark.parametrize("watcher", ["sqlite", "postgres", "listeners", "nobody"])
async def test_a_sync_call_timed_out_before_a_thread_ran_it_says_it_never_started(
    workspace: Path, watcher: str, request: pytest.FixtureRequest
) -> None:
    one_thread()
    held = Held()
    ran: list[str] = []

    @tool(read_only=True, timeout=0.05)
    def quick() -> str:
        """Return at once (once a thread runs it)."""
        ran.append("quick")
        return "done"

    events: list[ToolEvent] = []
    async with contextlib.AsyncExitStack() as stack:
        journal = None
        if watcher in ("sqlite", "postgres"):  # listeners too
            target = str(workspace / "j.sqlite3")
            if watcher == "postgres":
                target = request.getfixturevalue("postgres_url")
            journal = await stack.enter_async_context(await open_journal(target))
        watched = executor(workspace, held, journal, None if watcher == "nobody" else events, quick)
        holding = asyncio.ensure_future(watched.run(CALLS[:1]))
        await until(lambda: held.entered == [0], "the first call never ran")
        [outcome] = await watched.run([ToolCallRequest("q", "quick", {})])
        held.release.set()
        await holding
        await asyncio.to_thread(lambda: None)  # the one thread went past the call's turn
        rows = await journal.entries(session="s") if journal is not None else []
    assert outcome.error is not None and outcome.error.kind is ErrorKind.TIMEOUT
    text = outcome.result.text
    # It never started, so the model may send it again: nothing was done.
    assert "did not start" in text and "done so far" not in text, text
    assert ran == []  # nor did it start later, once the thread was free
    if watcher != "nobody":
        assert [e.call.id for e in events if e.type is EventType.CALL_STARTED] == ["c0"]
    if journal is not None:
        [row] = [e for e in rows if e.key.call_id == "q"]
        assert (row.state, row.started_at) == (CallState.FINISHED, None)
        assert row.outcome is not None and row.outcome["content"] == text


async def test_listeners_hear_a_sync_call_start_when_a_thread_runs_it(workspace: Path) -> None:
    one_thread()
    held = Held()
    events: list[ToolEvent] = []
    run = asyncio.ensure_future(executor(workspace, held, None, events).run(CALLS))
    await until(lambda: held.entered == [0], "the first call never ran")
    # The other two wait in the pool's queue: handed over, not started.
    seen = [(e.type, e.call.id) for e in events]
    held.release.set()
    await run
    assert seen == [(EventType.CALL_STARTED, "c0")]
    for call in ("c0", "c1", "c2"):
        assert [e.type for e in events if e.call.id == call] == [
            EventType.CALL_STARTED,
            EventType.CALL_FINISHED,
        ]


def test_a_thread_waiting_for_a_loop_never_run_again_gives_up(workspace: Path) -> None:
    """A loop stopped while a sync call's thread waits for its start mark, and never run
    again, answers nothing: the thread gives up (the call does not start) instead of
    waiting for ever, and is free for other work."""
    loop = asyncio.new_event_loop()
    pool = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(pool)
    held = Held()
    path = workspace / "j.sqlite3"

    async def begin() -> tuple[CallJournal, asyncio.Future[list[ToolOutcome]]]:
        journal = await open_journal(str(path))
        run = asyncio.ensure_future(executor(workspace, held, journal, []).run(CALLS[:2]))
        await until(lambda: held.entered == [0], "the first call never ran")
        return journal, run

    journal, run = loop.run_until_complete(begin())
    try:
        # The loop is left with its calls pending; the thread ends the first call and takes
        # the second, whose start the loop will never record.
        held.release.set()
        assert pool.submit(str, "free").result(timeout=60) == "free"  # a bound, no timing
        assert held.entered == [0]
        with sqlite3.connect(path) as conn:
            row = conn.execute("SELECT state FROM toolbridge_calls WHERE call_id = 'c1'")
            assert row.fetchone() == ("queued",)
    finally:  # cleaning up runs the loop again
        run.cancel()
        loop.run_until_complete(asyncio.gather(run, return_exceptions=True))
        loop.run_until_complete(journal.close())
        loop.close()
        pool.shutdown()
