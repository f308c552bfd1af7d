"""Ray: a call's start on its worker. A journaled sync tool's call asks for its go when
one of the worker's threads starts its work, not when it gets a slot, so a call waiting
for a thread is still queued (a stop lets go of it; a killed caller leaves it queued, to
run as its first attempt); whoever watches a sync call, one stopped or timed out before
a thread started it never runs and spares its worker, and reads as locally, as does one
whose start the journal records too late; a go that comes late starts the call once; a
go that never comes (a caller that is gone) frees the call's slot after `go_timeout`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from tests.backends.test_ray_seams import (
    SOURCE,
    WAIT,
    _lines,
    claimed,
    driver,
    executor_for,
    lines,
)

from toolbridge import ToolCallRequest
from toolbridge.backends.ray import RayBackend, ToolSource
from toolbridge.core.registry import timeout_error
from toolbridge.execution.outcomes import ToolOutcome
from toolbridge.journal import CallJournal, CallKey, CallState, SQLiteJournal

ONE_THREAD = ToolSource("seam_tools:build_one_thread")
BATCH = [ToolCallRequest(f"c{n}", "hold_sync", {"label": f"c{n}"}) for n in range(3)]


@pytest.fixture
def one_thread(ray_runtime: None) -> Iterator[RayBackend]:
    """One worker with one thread for sync tools, and many more slots."""
    backend = RayBackend(ONE_THREAD, workers=1, grace=WAIT)
    backend.start()
    yield backend
    backend.close()


async def states(journal: CallJournal) -> dict[str, CallState]:
    return {e.key.call_id: e.state for e in await journal.entries(session="s")}


async def test_sync_calls_waiting_for_a_worker_thread_are_queued_until_one_runs_them(
    workspace: Path, one_thread: RayBackend
) -> None:
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        executor = executor_for(workspace, one_thread, journal=journal)
        run = asyncio.create_task(executor.run(BATCH))
        [first] = await lines(workspace / "started.txt", 1)
        during = await states(journal)
        (workspace / "release").write_text("go")
        outcomes = await asyncio.wait_for(run, WAIT)
        entries = await journal.entries(session="s")
    ran = first.split()[0]
    # All three have a slot on the worker, but its one thread runs one: the others have
    # not started, so the journal must not say they run.
    assert during == {c.id: CallState.RUNNING if c.id == ran else CallState.QUEUED for c in BATCH}
    assert [o.result.text for o in outcomes] == [f"c{n} released" for n in range(3)]
    assert sorted(line.split()[0] for line in _lines(workspace / "started.txt")) == [
        "c0", "c1", "c2",
    ]  # fmt: skip
    assert {(e.state, e.attempt) for e in entries} == {(CallState.FINISHED, 1)}


async def test_a_stop_lets_go_of_the_sync_calls_no_worker_thread_ran(
    workspace: Path, one_thread: RayBackend
) -> None:
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        run = asyncio.create_task(executor_for(workspace, one_thread, journal=journal).run(BATCH))
        [first] = await lines(workspace / "started.txt", 1)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        stopped = await states(journal)
        # The next run (a new process would do the same), on the restarted worker.
        (workspace / "release").write_text("go")
        again = await asyncio.wait_for(
            executor_for(workspace, one_thread, journal=journal).run(BATCH), WAIT
        )
        entries = {e.key.call_id: e for e in await journal.entries(session="s")}
    ran = first.split()[0]
    # The call its thread ran may have partly run; the others never started: queued again.
    assert stopped == {
        c.id: CallState.INTERRUPTED if c.id == ran else CallState.QUEUED for c in BATCH
    }
    for call, outcome in zip(BATCH, again, strict=True):
        if call.id == ran:  # not read-only: the user is asked first
            assert outcome.kind == "interrupted" and outcome.approval is not None
        else:  # run now without asking anyone, as their first attempt
            assert outcome.ok, outcome.result.text
            assert (entries[call.id].state, entries[call.id].attempt) == (CallState.FINISHED, 1)
    started = sorted(line.split()[0] for line in _lines(workspace / "started.txt"))
    assert started == ["c0", "c1", "c2"]  # each once: the stopped run started only `ran`


async def test_sync_calls_a_killed_caller_left_waiting_for_a_worker_thread_run_as_first_attempts(
    workspace: Path, one_thread: RayBackend
) -> None:
    caller = await driver(workspace, "threads")  # BATCH, on a worker with one thread
    try:
        [first] = await lines(workspace / "started.txt", 1)
        live = await claimed(workspace, len(BATCH))
    finally:
        os.killpg(caller.pid, signal.SIGKILL)  # the caller, its Ray and its worker
        await caller.wait()
    ran = first.split()[0]
    assert live == {c.id: CallState.RUNNING if c.id == ran else CallState.QUEUED for c in BATCH}
    (workspace / "release").write_text("go")
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        killed = await states(journal)
        again = await asyncio.wait_for(
            executor_for(workspace, one_thread, journal=journal).run(BATCH), WAIT
        )
        entries = {e.key.call_id: e for e in await journal.entries(session="s")}
    assert killed == {
        c.id: CallState.INTERRUPTED if c.id == ran else CallState.QUEUED for c in BATCH
    }
    for call, outcome in zip(BATCH, again, strict=True):
        if call.id == ran:  # it may have partly run, and is not read-only: asked first
            assert outcome.kind == "interrupted" and outcome.approval is not None
        else:  # never started: run now as first attempts, with nothing to approve
            assert outcome.ok, outcome.result.text
            assert (entries[call.id].state, entries[call.id].attempt) == (CallState.FINISHED, 1)
    started = sorted(line.split()[0] for line in _lines(workspace / "started.txt"))
    assert started == ["c0", "c1", "c2"]  # each once


WATCHERS = ["journal", "listeners", "nobody"]


async def watched(
    stack: contextlib.AsyncExitStack, folder: Path, watcher: str, events: list[Any]
) -> dict[str, Any]:
    """The executor options of a caller that watches its calls' starts with a journal (in
    `folder`), with listeners (into `events`), or not at all."""
    if watcher == "journal":
        journal = SQLiteJournal(folder / "journal.sqlite3")
        return {"journal": await stack.enter_async_context(journal)}
    return {"listeners": [events.append]} if watcher == "listeners" else {}


HOLD = ToolCallRequest("h", "hold_sync", {"label": "h"})  # holds a thread until released
LATE = ToolCallRequest("q", "limited_sync", {"label": "q"})  # 0.5 s limit


async def timed_out_locally(folder: Path, watcher: str) -> ToolOutcome:
    """`LATE` timed out on the local backend while `HOLD` holds its one thread: what the
    model reads of it there."""
    await asyncio.to_thread(folder.mkdir)
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
    async with contextlib.AsyncExitStack() as stack:
        options = await watched(stack, folder, watcher, [])
        executor = executor_for(folder, None, session="t", **options)
        held = asyncio.create_task(executor.run([HOLD]))
        await lines(folder / "started.txt", 1)
        [late] = await asyncio.wait_for(executor.run([LATE]), WAIT)
        (folder / "release").write_text("go")
        await asyncio.wait_for(held, WAIT)
    return late


async def thread_held(workspace: Path, backend: RayBackend) -> asyncio.Task[list[ToolOutcome]]:
    """The run of `HOLD`, once it holds the worker's one thread (until ``release``)."""
    held = asyncio.create_task(executor_for(workspace, backend).run([HOLD]))
    await lines(workspace / "started.txt", 1)
    return held


@pytest.mark.parametrize("watcher", WATCHERS)
async def test_a_sync_call_whose_limit_ends_while_it_waits_for_a_worker_thread_spares_it(
    workspace: Path, one_thread: RayBackend, watcher: str
) -> None:
    """Its thread never started it, so nothing runs on that needs a new worker process:
    the call that holds the thread goes on. Whoever watches the call (a journal,
    listeners, nobody), it reads as locally: it never ran, and listeners never hear it
    start."""
    from toolbridge.execution.outcomes import EventType

    held = await thread_held(workspace, one_thread)
    events: list[Any] = []
    async with contextlib.AsyncExitStack() as stack:
        options = await watched(stack, workspace, watcher, events)
        waiter = executor_for(workspace, one_thread, session="t", **options)
        [late] = await asyncio.wait_for(waiter.run([LATE]), WAIT)
        [pid] = await asyncio.wait_for(waiter.run([ToolCallRequest("pid", "worker_pid", {})]), WAIT)
        (workspace / "release").write_text("go")
        [released] = await asyncio.wait_for(held, WAIT)
        if watcher == "journal":
            rows = await options["journal"].entries(session="t")
            [entry] = [row for row in rows if row.key.call_id == "q"]
            assert (entry.state, entry.started_at) == (CallState.FINISHED, None)
    local = await timed_out_locally(workspace / "local", watcher)
    assert late.result.text == timeout_error("limited_sync", 0.5, started=False).render()
    assert (late.result.content, late.error) == (local.result.content, local.error)
    if watcher == "listeners":
        starts = [e.call.id for e in events if e.type is EventType.CALL_STARTED]
        assert starts == ["pid"]  # q never started
    [started] = _lines(workspace / "started.txt")
    assert started.split() == ["h", str(pid.value)]  # the same worker: it was not killed
    assert released.ok, released.result.text


@pytest.mark.parametrize("watcher", WATCHERS)
async def test_a_stopped_run_whose_sync_calls_wait_for_a_worker_thread_spares_it(
    workspace: Path, one_thread: RayBackend, watcher: str
) -> None:
    """The calls of the stopped run never started (journaled: their go was never sent;
    else the worker's own gate dropped them), so no thread of theirs runs on: the call
    of another run that holds the thread goes on, and they never run, even later."""

    held = await thread_held(workspace, one_thread)
    events: list[Any] = []
    async with contextlib.AsyncExitStack() as stack:
        options = await watched(stack, workspace, watcher, events)
        stopped = executor_for(workspace, one_thread, session="t", **options)
        batch = [
            ToolCallRequest("m", "mark", {"label": "m"}),  # async: it runs, in the same request
            *(ToolCallRequest(f"w{n}", "mark_sync", {"label": f"w{n}"}) for n in range(2)),
        ]
        run = asyncio.create_task(stopped.run(batch))
        await lines(workspace / "effects.txt", 1)  # the request is on the worker
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        heard = [(e.type.value, e.call.id) for e in events]
        [pid] = await asyncio.wait_for(
            stopped.run([ToolCallRequest("pid", "worker_pid", {})]), WAIT
        )
        (workspace / "release").write_text("go")
        [released] = await asyncio.wait_for(held, WAIT)
        after = ToolCallRequest("after", "mark_sync", {"label": "after"})  # the thread's next
        [later] = await asyncio.wait_for(stopped.run([after]), WAIT)
        if watcher == "journal":
            left = {e.key.call_id: e.state for e in await options["journal"].entries(session="t")}
            assert (left["w0"], left["w1"]) == (CallState.QUEUED, CallState.QUEUED)  # let go of
    [started] = _lines(workspace / "started.txt")
    assert started.split() == ["h", str(pid.value)]  # the same worker: it was not killed
    assert released.ok, released.result.text
    assert later.ok, later.result.text
    assert _lines(workspace / "effects.txt") == ["m", "after"]  # the stopped sync calls never ran
    if watcher == "listeners":  # as a local run's listeners hear them: they never start
        heard_of = {call: [kind for kind, of in heard if of == call] for call in ("w0", "w1")}
        assert heard_of == {"w0": ["call_finished"], "w1": ["call_finished"]}


class LateGo(SQLiteJournal):
    """A real SQLite journal that records a call's start only once the test lets it: the
    caller answers its worker's ask for the go late."""

    asked: asyncio.Event
    answer: asyncio.Event

    async def start(self, key: CallKey) -> None:
        self.asked.set()
        await self.answer.wait()
        await super().start(key)


@pytest.mark.parametrize("name", ["mark", "mark_sync"])
async def test_a_go_answered_late_starts_the_call_once(
    workspace: Path, ray_runtime: None, name: str
) -> None:
    backend = RayBackend(SOURCE, workers=1, grace=WAIT)
    try:
        backend.start()
        async with LateGo(workspace / "journal.sqlite3") as journal:
            journal.asked, journal.answer = asyncio.Event(), asyncio.Event()
            executor = executor_for(workspace, backend, journal=journal)
            run = asyncio.create_task(executor.run([ToolCallRequest("m", name, {"label": "m"})]))
            await asyncio.wait_for(journal.asked.wait(), WAIT)  # its worker asked
            asked = await states(journal), _lines(workspace / "effects.txt")
            journal.answer.set()
            [outcome] = await asyncio.wait_for(run, WAIT)
            [entry] = await journal.entries(session="s")
    finally:
        backend.close()
    assert asked == ({"m": CallState.QUEUED}, [])  # it waits for its go
    assert outcome.ok, outcome.result.text
    assert (entry.state, entry.attempt) == (CallState.FINISHED, 1)
    assert _lines(workspace / "effects.txt") == ["m"]  # once


async def recorded_too_late(
    folder: Path, backend: RayBackend | None, thread_free: Callable[[], Awaitable[object]]
) -> ToolOutcome:
    """`LATE` (a sync tool, 0.5 s limit) with a journal that records its start only once
    the call's one thread is free again (`thread_free`: the limit ended while the thread
    waited for that start, so it was told no), on Ray (`backend`) or locally (None), in a
    `folder` of its own. The run ends once the late start is answered."""
    await asyncio.to_thread(folder.mkdir)
    async with LateGo(folder / "late.sqlite3") as journal:
        journal.asked, journal.answer = asyncio.Event(), asyncio.Event()
        executor = executor_for(folder, backend, session="t", journal=journal)
        run = asyncio.create_task(executor.run([LATE]))
        await asyncio.wait_for(journal.asked.wait(), WAIT)  # its thread asked, and waits
        await asyncio.wait_for(thread_free(), WAIT)
        journal.answer.set()  # the start, recorded now, comes too late to count
        [late] = await asyncio.wait_for(run, WAIT)
    return late


async def test_a_journal_slower_than_a_sync_calls_limit_times_it_out_as_locally(
    workspace: Path, one_thread: RayBackend
) -> None:
    """Recording a sync tool's start counts in its limit on both backends (its thread asks
    for it once the limit runs): a journal slower than the limit ends the call before it
    starts, with the same text on Ray as locally, and its worker is spared."""
    pid = ToolCallRequest("pid", "worker_pid", {})
    free = ToolCallRequest("free", "mark_sync", {"label": "free"})  # needs the one thread
    [before] = await asyncio.wait_for(executor_for(workspace, one_thread).run([pid]), WAIT)
    on_ray = await recorded_too_late(
        workspace / "ray", one_thread, lambda: executor_for(workspace, one_thread).run([free])
    )
    [after] = await asyncio.wait_for(executor_for(workspace, one_thread).run([pid]), WAIT)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))  # locally, one thread too
    local = await recorded_too_late(
        workspace / "local", None, lambda: loop.run_in_executor(None, str)
    )
    assert on_ray.result.text == timeout_error("limited_sync", 0.5, started=False).render()
    assert (on_ray.result.content, on_ray.error) == (local.result.content, local.error)
    assert before.value == after.value  # the same worker: it was not killed
    for folder in ("ray", "local"):  # it never ran, on either
        assert _lines(workspace / folder / "started.txt") == []


async def _items(refs: Any) -> list[Any]:
    from toolbridge.backends.ray.wire import unpack_message

    return [item async for ref in refs for item in unpack_message(await ref)]


@pytest.mark.parametrize("name", ["mark", "mark_sync"])
async def test_a_go_that_never_comes_frees_the_slot_its_call_held(
    workspace: Path, ray_runtime: None, name: str
) -> None:
    from toolbridge.backends.ray.wire import (
        CONTROL,
        FAILED,
        STARTING,
        Call,
        Context,
        Request,
        pack_message,
    )

    # One slot, and a caller that asks for a call (gated: journaled) and is then gone:
    # it never answers the worker's ask. The real wire, to a real worker.
    source = ToolSource("seam_tools:build_logging")  # the worker's warnings: worker.log
    backend = RayBackend(source, workers=1, max_calls_per_worker=1, grace=WAIT, go_timeout=0.5)
    try:
        backend.start()
        [actor] = backend._pool(None).actors
        batch = next(backend._batches)
        call = Call(0, name, {"label": "never"}, "n", None, None, False, True, False)
        request = Request(batch, (Context(str(workspace), "s"),), (call,))
        refs = actor.run.options(num_returns="streaming").remote(pack_message(request))
        items = await asyncio.wait_for(_items(refs), WAIT)
        # A go after the worker dropped the call starts nothing.
        await actor.go.options(concurrency_group=CONTROL).remote(batch, {0: 0.0})
        [after] = await asyncio.wait_for(
            executor_for(workspace, backend).run([ToolCallRequest("m", "mark", {"label": "m"})]),
            WAIT,
        )
    finally:
        backend.close()
    assert items[0] == (0, STARTING, None)
    [(position, kind, why)] = items[1:]
    assert (position, kind) == (0, FAILED)
    assert "no go to start the call from its caller within 0.5 s" in why
    warning = f"call 'n' ({name}) had no go from its caller within 0.5 s (go_timeout"
    assert warning in (workspace / "worker.log").read_text()
    assert after.ok, after.result.text  # the slot was freed: the next call ran
    assert _lines(workspace / "effects.txt") == ["m"]  # the dropped call never ran
