"""Ray at its seams with the journal, a worker's life and the texts the model reads: the
journal says running only once a worker started the tool; a worker keeps a bounded number
of registries; a tool raising `CancelledError` by itself reads the same on both backends."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
from toolbridge.backends.ray import RayBackend, ToolSource
from toolbridge.journal import CallState, SQLiteJournal

SOURCE = ToolSource("seam_tools:build")
WAIT = 30.0  # seconds before an awaited effect counts as never coming (a hang guard)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def lines(path: Path, count: int) -> list[str]:
    """The lines of `path` once it has `count` of them (written by workers, later)."""
    end = asyncio.get_running_loop().time() + WAIT
    while len(found := _lines(path)) < count:
        assert asyncio.get_running_loop().time() < end, f"{path.name}: only {found}"
        await asyncio.sleep(0.05)
    return found


def executor_for(
    workspace: Path, backend: RayBackend | None, session: str = "s", **options: object
) -> ToolExecutor:
    """An executor of the seam tools on `backend` (None: the local one)."""
    registry = SOURCE.registry(ToolContext(workspace=workspace, session=session))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    return ToolExecutor(registry, policy, backend=backend, **options)  # type: ignore[arg-type]


async def test_a_call_waiting_on_a_busy_worker_is_queued_and_outlives_its_worker(
    workspace: Path, ray_runtime: None
) -> None:
    # One worker with one slot: the first call holds it, the second waits on the worker.
    backend = RayBackend(SOURCE, workers=1, max_calls_per_worker=1, grace=WAIT)
    try:
        backend.start()
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            executor = executor_for(workspace, backend, journal=journal)
            batch = [
                ToolCallRequest("a", "hold", {"label": "a"}),
                ToolCallRequest("b", "mark", {"label": "b"}),
            ]
            task = asyncio.create_task(executor.run(batch))
            [started] = await lines(workspace / "started.txt", 1)
            states = {e.key.call_id: e.state for e in await journal.entries(session="s")}
            # The tool of "b" has not started: the journal must not say it runs.
            assert states == {"a": CallState.RUNNING, "b": CallState.QUEUED}
            os.kill(int(started.split()[1]), signal.SIGKILL)  # the worker dies
            held, marked = await asyncio.wait_for(task, WAIT)
            entries = {e.key.call_id: e for e in await journal.entries(session="s")}
    finally:
        backend.close()
    assert held.kind == "worker_lost"  # it had started: it may have partly run
    # "b" never started on the dead worker: it ran on the new one, once, as attempt 1.
    assert marked.ok, marked.result.text
    assert _lines(workspace / "effects.txt") == ["b"]
    assert entries["b"].state is CallState.FINISHED
    assert entries["b"].attempt == 1


async def test_a_worker_keeps_a_bounded_number_of_registries(
    workspace: Path, ray_runtime: None
) -> None:
    backend = RayBackend(SOURCE, workers=1, contexts_per_worker=4)
    try:
        backend.start()
        for session in range(12):  # twelve sessions, one after another, on the one worker
            executor = executor_for(workspace, backend, session=f"s{session}")
            [outcome] = await executor.run([ToolCallRequest("n", "live_registries", {})])
            assert outcome.ok, outcome.result.text
            assert 1 <= outcome.value <= 4, f"session {session}: {outcome.value} registries"
    finally:
        backend.close()


async def test_a_cancelled_run_leaves_a_call_queued_on_its_worker_queued_for_the_next_run(
    workspace: Path, ray_runtime: None
) -> None:
    backend = RayBackend(SOURCE, workers=1, max_calls_per_worker=1, grace=WAIT)
    batch = [
        ToolCallRequest("a", "hold", {"label": "a"}),
        ToolCallRequest("b", "mark", {"label": "b"}),
    ]
    try:
        backend.start()
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            task = asyncio.create_task(executor_for(workspace, backend, journal=journal).run(batch))
            await lines(workspace / "started.txt", 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            states = {e.key.call_id: e.state for e in await journal.entries(session="s")}
            assert states == {"a": CallState.INTERRUPTED, "b": CallState.QUEUED}
            # The next run (a new process would do the same): "b" runs without asking, as
            # attempt 1; "a" may have partly run, so it waits for the user.
            held, marked = await asyncio.wait_for(
                executor_for(workspace, backend, journal=journal).run(batch), WAIT
            )
            attempts = {e.key.call_id: e.attempt for e in await journal.entries(session="s")}
    finally:
        backend.close()
    assert held.kind == "interrupted" and held.approval is not None
    assert marked.ok, marked.result.text
    assert attempts["b"] == 1
    assert _lines(workspace / "effects.txt") == ["b"]


@pytest.mark.parametrize("name", ["slow_start", "limited_sync"])  # async, sync (in a thread)
async def test_a_call_whose_limit_ends_while_it_waits_on_a_busy_worker_never_starts(
    workspace: Path, ray_runtime: None, name: str
) -> None:
    from toolbridge.core.registry import timeout_error

    backend = RayBackend(SOURCE, workers=1, max_calls_per_worker=1, grace=WAIT)
    try:
        backend.start()
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            executor = executor_for(workspace, backend, journal=journal)
            holder = asyncio.create_task(
                executor.run([ToolCallRequest("a", "hold", {"label": "a"})])
            )
            await lines(workspace / "started.txt", 1)
            # Its 0.5 s limit runs out on the worker, whose only slot "a" holds.
            other = executor_for(workspace, backend, session="t", journal=journal)
            [late] = await asyncio.wait_for(
                other.run([ToolCallRequest("late", name, {"label": "late"})]), WAIT
            )
            assert late.result.text == timeout_error(name, 0.5, started=False).render()
            [entry] = await journal.entries(session="t")
            holder.cancel()
            with pytest.raises(asyncio.CancelledError):
                await holder
            [pid] = await asyncio.wait_for(
                other.run([ToolCallRequest("pid", "worker_pid", {})]), WAIT
            )
    finally:
        backend.close()
    assert entry.state is CallState.FINISHED and entry.started_at is None
    [started] = _lines(workspace / "started.txt")
    assert started.split() == ["a", str(pid.value)]  # the same worker: none was killed


async def test_a_call_no_worker_can_take_is_journaled_as_never_started(
    workspace: Path, ray_runtime: None
) -> None:
    backend = RayBackend(SOURCE, workers=1)
    try:
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            executor = executor_for(workspace, backend, journal=journal)
            [outcome] = await asyncio.wait_for(
                executor.run([ToolCallRequest("q", "needs_quantum", {})]), WAIT
            )
            [entry] = await journal.entries(session="s")
    finally:
        backend.close()
    assert "no worker offers resource 'quantum_chip'" in outcome.result.text
    assert entry.state is CallState.FINISHED and entry.started_at is None


async def test_a_worker_killed_mid_call_gives_one_start_one_finish_and_the_retrys_progress(
    workspace: Path, ray_runtime: None
) -> None:
    from toolbridge.execution.outcomes import EventType, ToolEvent

    backend = RayBackend(SOURCE, workers=1, grace=WAIT)
    events: list[ToolEvent] = []
    try:
        backend.start()
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            executor = executor_for(workspace, backend, journal=journal)
            executor.listeners.append(events.append)
            [outcome] = await asyncio.wait_for(
                executor.run([ToolCallRequest("p", "progress_then_die", {"label": "p"})]), WAIT
            )
            [entry] = await journal.entries(session="s")
    finally:
        backend.close()
    assert outcome.ok, outcome.result.text
    assert entry.state is CallState.FINISHED and entry.attempt == 1
    kinds = [event.type for event in events]
    assert kinds[0] is EventType.CALL_STARTED and kinds[-1] is EventType.CALL_FINISHED
    assert kinds.count(EventType.CALL_STARTED) == kinds.count(EventType.CALL_FINISHED) == 1
    reports = [(e.progress.progress, e.progress.message) for e in events if e.progress]
    assert reports[-2:] == [(1, "half way"), (2, "done")]  # the retry's, in order


async def driver(workspace: Path, *args: str) -> asyncio.subprocess.Process:
    """A caller process (seam_driver.py) on a local Ray of its own, in its own process
    group (a kill of the group takes its Ray processes too)."""
    import sys

    here = Path(__file__).parent
    paths = [str(here), *filter(None, [os.environ.get("PYTHONPATH")])]
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(here / "seam_driver.py"),
        str(workspace),
        *args,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        start_new_session=True,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def claimed(workspace: Path, count: int) -> dict[str, CallState]:
    """The states in the journal at workspace once `count` calls are claimed."""
    end = asyncio.get_running_loop().time() + WAIT
    while True:
        async with SQLiteJournal(workspace / "journal.sqlite3", create=False) as reader:
            states = {e.key.call_id: e.state for e in await reader.entries(session="s")}
        if len(states) >= count:
            return states
        assert asyncio.get_running_loop().time() < end, f"only claimed: {states}"
        await asyncio.sleep(0.05)


async def test_a_killed_caller_leaves_the_call_its_busy_worker_never_started_queued(
    workspace: Path, ray_runtime: None
) -> None:
    caller = await driver(workspace)
    try:
        await lines(workspace / "started.txt", 1)  # "a" holds the worker's only slot
        states = await claimed(workspace, 2)  # "b" is claimed too (it waits on the worker)
        assert states["b"] is CallState.QUEUED  # its tool never started
    finally:
        os.killpg(caller.pid, signal.SIGKILL)
        await caller.wait()
    backend = RayBackend(SOURCE, workers=1, grace=WAIT)
    try:
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            states = {e.key.call_id: e.state for e in await journal.entries(session="s")}
            assert states == {"a": CallState.INTERRUPTED, "b": CallState.QUEUED}
            batch = [
                ToolCallRequest("a", "hold", {"label": "a"}),
                ToolCallRequest("b", "mark", {"label": "b"}),
            ]
            held, marked = await asyncio.wait_for(
                executor_for(workspace, backend, journal=journal).run(batch), WAIT
            )
            attempts = {e.key.call_id: e.attempt for e in await journal.entries(session="s")}
    finally:
        backend.close()
    assert held.kind == "interrupted" and held.approval is not None
    assert marked.ok, marked.result.text
    assert attempts["b"] == 1
    assert _lines(workspace / "effects.txt") == ["b"]


async def test_journaled_calls_in_more_requests_than_a_worker_serves_at_once_all_run(
    workspace: Path, ray_runtime: None
) -> None:
    # A worker with one slot serves 1 + 8 requests at once. Twelve calls, each in a request
    # of its own, fill that while the first holds the slot: the worker's question "may
    # this one start?" and the caller's answer must still get through.
    backend = RayBackend(SOURCE, workers=1, max_calls_per_worker=1, grace=WAIT)
    loop = asyncio.get_running_loop()
    try:
        backend.start()
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            first = asyncio.create_task(
                executor_for(workspace, backend, session="first", journal=journal).run(
                    [ToolCallRequest("h", "hold_until_released", {"label": "h"})]
                )
            )
            await lines(workspace / "started.txt", 1)
            runs = []
            for n in range(12):
                executor = executor_for(workspace, backend, session=f"s{n}", journal=journal)
                call = ToolCallRequest("m", "mark", {"label": f"m{n}"})
                runs.append(asyncio.create_task(executor.run([call])))
                end = loop.time() + WAIT
                dispatcher = backend._dispatchers[loop]
                while len(dispatcher.tasks) < n + 2:  # one request each, "h"'s included
                    assert loop.time() < end, f"call {n} was never sent"
                    await asyncio.sleep(0.01)
            (workspace / "release").write_text("go")
            results = await asyncio.wait_for(asyncio.gather(first, *runs), WAIT * 2)
    finally:
        backend.close()
    assert all(outcome.ok for [outcome] in results), [o.result.text for [o] in results]
    assert sorted(_lines(workspace / "effects.txt")) == sorted(f"m{n}" for n in range(12))


async def test_a_worker_keeps_the_registry_of_a_session_whose_calls_run(
    workspace: Path, ray_runtime: None
) -> None:
    # Room for one registry: a session with a call running keeps its own, so its next
    # call meets the same tools (and their state), not a second set built beside them.
    backend = RayBackend(SOURCE, workers=1, contexts_per_worker=1, grace=WAIT)

    async def serial(session: str) -> int:
        executor = executor_for(workspace, backend, session=session)
        [outcome] = await executor.run([ToolCallRequest("n", "registry_serial", {})])
        assert outcome.ok, outcome.result.text
        return int(outcome.value)

    try:
        backend.start()
        held = asyncio.create_task(
            executor_for(workspace, backend, session="a").run(
                [ToolCallRequest("h", "hold_until_released", {"label": "h"})]
            )
        )
        await lines(workspace / "started.txt", 1)
        first = await serial("a")
        other = await serial("b")  # over the cap while "a" runs: "a" stays
        again = await serial("a")
        (workspace / "release").write_text("go")
        [released] = await asyncio.wait_for(held, WAIT)
    finally:
        backend.close()
    assert released.ok, released.result.text
    assert other != first
    assert again == first


async def test_a_cancelled_call_that_will_not_stop_is_interrupted_and_its_worker_replaced(
    workspace: Path, ray_runtime: None
) -> None:
    backend = RayBackend(SOURCE, workers=1, grace=0.5)
    try:
        backend.start()
        async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
            executor = executor_for(workspace, backend, journal=journal)
            task = asyncio.create_task(
                executor.run([ToolCallRequest("s", "stubborn", {"label": "s"})])
            )
            [started] = await lines(workspace / "started.txt", 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            [entry] = await journal.entries(session="s")
            # The worker is killed (the call ignores its cancellation); a new one serves.
            pid = int(started.split()[1])
            end = asyncio.get_running_loop().time() + WAIT
            while _alive(pid):
                assert asyncio.get_running_loop().time() < end, "the worker was never killed"
                await asyncio.sleep(0.05)
            [after] = await asyncio.wait_for(
                executor.run([ToolCallRequest("m", "mark", {"label": "m"})]), WAIT
            )
    finally:
        backend.close()
    assert entry.state is CallState.INTERRUPTED  # it started: it may have partly run
    assert after.ok, after.result.text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("setting", "value", "rule"),
    [
        ("workers", 0, ">= 1"), ("workers", -1, ">= 1"), ("workers_per_resource", 0, ">= 1"),
        ("max_calls_per_worker", 0, ">= 1"), ("contexts_per_worker", 0, ">= 1"),
        ("retries", -1, ">= 0"), ("grace", -1, ">= 0 seconds"),
        ("grace", float("nan"), ">= 0 seconds"), ("start_timeout", 0, "> 0 seconds"),
        ("go_timeout", 0, "> 0 seconds"), ("go_timeout", -1, "> 0 seconds"),
        ("go_timeout", float("nan"), "> 0 seconds"),
    ],
)  # fmt: skip
def test_a_setting_out_of_range_is_refused_saying_which_and_what_it_is(
    ray_runtime: None, setting: str, value: float, rule: str
) -> None:
    # Accepted, workers=0 or max_calls_per_worker=0 left every call waiting for a worker
    # that never comes, and its text blamed a busy cluster.
    with pytest.raises(ValueError, match=f"{setting} must be {rule}, got {value!r}: it is "):
        RayBackend(SOURCE, **{setting: value})
