"""Acceptance review of the Ray backend at its seams with the journal and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
from toolbridge.backends.ray import RayBackend, ToolSource
from toolbridge.journal import CallState, SQLiteJournal

SOURCE = ToolSource("ray_tools:build")
WAIT = 30.0  # seconds before an awaited effect counts as never coming (a hang guard)


@pytest.fixture(scope="module")
def ray_backend(ray_runtime: None) -> Iterator[RayBackend]:
    backend = RayBackend(SOURCE, workers=2, grace=WAIT)
    backend.start()
    yield backend
    backend.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def lines(path: Path, count: int) -> list[str]:
    """The lines of `path` once it has `count` of them (written by workers, later)."""
    end = asyncio.get_running_loop().time() + WAIT
    while True:
        found = _lines(path)
        if len(found) >= count:
            return found
        assert asyncio.get_running_loop().time() < end, f"{path.name}: only {found}"
        await asyncio.sleep(0.05)


async def test_a_cancelled_batch_on_ray_leaves_started_calls_interrupted_and_queued_ones_queued(
    workspace: Path, ray_backend: RayBackend
) -> None:
    registry = SOURCE.registry(ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, max_concurrency=2)
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        executor = ToolExecutor(registry, policy, backend=ray_backend, journal=journal)
        batch = [ToolCallRequest(f"c{i}", "nap", {"seconds": 600, "label": f"n{i}"})
                 for i in range(4)]  # fmt: skip
        task = asyncio.create_task(executor.run(batch))
        started = await lines(workspace / "spans.txt", 2)
        during = {e.key.call_id: e.state for e in await journal.entries(session="s")}
        assert sorted(during.values()) == ["queued", "queued", "running", "running"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancelled = await lines(workspace / "cancelled.txt", 2)
        assert sorted(cancelled) == sorted(line.split()[0] for line in started)
        after = {e.key.call_id: e.state for e in await journal.entries(session="s")}
    ran = {f"c{line.split()[0][1:]}" for line in started}
    assert {k for k, v in after.items() if v is CallState.INTERRUPTED} == ran
    assert {k for k, v in after.items() if v is CallState.QUEUED} == set(during) - ran


async def test_a_cancelled_call_that_waited_for_a_worker_leaves_nothing_polling(
    workspace: Path, ray_runtime: None
) -> None:
    backend = RayBackend(ToolSource("parity_tools:build"), workers=1, start_timeout=600)
    try:
        registry = ToolSource("parity_tools:build").registry(
            ToolContext(workspace=workspace, session="s")
        )
        executor = ToolExecutor(registry, ExecutionPolicy(loop_guard=False), backend=backend)
        task = asyncio.create_task(
            executor.run([ToolCallRequest("n", "needs_quantum_no_limit", {})])
        )
        loop = asyncio.get_running_loop()
        end = loop.time() + WAIT
        while not (dispatcher := backend._dispatchers.get(loop)) or not dispatcher.waiting:
            assert loop.time() < end, "the call never waited for a worker"
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # No worker will ever offer the resource: nothing should still look for one.
        while dispatcher.waiting or dispatcher.flush is not None:
            assert loop.time() < end, f"still polling for {dispatcher.waiting}"
            await asyncio.sleep(0.05)
    finally:
        backend.close()
