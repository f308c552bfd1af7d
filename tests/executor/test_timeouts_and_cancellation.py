"""Time limits, subprocess isolation of blocking tools, and cancellation of a batch."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from toolbridge import ErrorKind, Tool, ToolCallRequest, ToolDefinitionError, ToolRegistry, tool
from toolbridge.execution.executor import ExecutionPolicy, OutcomeStatus, ToolExecutor
from toolbridge.execution.isolation import IsolatedFunctionTool, isolated_tool


def _process_is_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text else None


async def _wait_for_pid(path: Path) -> int:
    """The pid a worker process wrote; another process cannot set an asyncio.Event."""
    async with asyncio.timeout(60):  # a hang guard: process start-up on a busy machine
        while True:
            pid = await asyncio.to_thread(_read_pid, path)
            if pid is not None:
                return pid
            await asyncio.sleep(0.01)


async def test_an_async_tool_over_its_limit_is_cancelled_and_reported(
    registry: ToolRegistry,
) -> None:
    seen: list[str] = []

    class Hang(Tool):
        name = "hang"
        read_only = True
        timeout = 0.05

        async def execute(self, **kwargs: Any) -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
            return "never"

        async def after_execute(self, args: Mapping[str, Any], result: Any) -> None:
            seen.append(f"after:{result.error_kind}")

    registry.register(Hang())
    [outcome] = await ToolExecutor(registry).run([ToolCallRequest("t", "hang", {})])

    assert outcome.status is OutcomeStatus.ERROR
    assert outcome.kind is ErrorKind.TIMEOUT
    assert outcome.result.text.startswith("Error: tool 'hang' did not finish")
    assert "0.05 s" in outcome.result.text
    assert seen == ["cancelled", "after:timeout"]


async def test_the_policy_default_applies_and_a_tool_limit_wins(registry: ToolRegistry) -> None:
    @tool(read_only=True)
    async def slow() -> str:
        await asyncio.Event().wait()
        return "never"

    @tool(read_only=True, timeout=0.02)
    async def slower() -> str:
        await asyncio.Event().wait()
        return "never"

    registry.register(slow)
    registry.register(slower)
    executor = ToolExecutor(registry, ExecutionPolicy(default_timeout=0.03))
    outcomes = await executor.run(
        [ToolCallRequest("a", "slow", {}), ToolCallRequest("b", "slower", {})]
    )

    assert [o.kind for o in outcomes] == [ErrorKind.TIMEOUT, ErrorKind.TIMEOUT]
    assert "0.03 s" in outcomes[0].result.text
    assert "0.02 s" in outcomes[1].result.text


async def test_an_isolated_blocking_tool_is_killed_on_timeout(
    registry: ToolRegistry, blocking_module: ModuleType, tmp_path: Path
) -> None:
    pid_file = tmp_path / "worker.pid"
    # The limit this test trips also covers starting the worker process and its import of
    # the tool, which must come first (it writes the pid): generous, as on a busy 2-core
    # machine, where 5 s was not always enough.
    registry.register(IsolatedFunctionTool(blocking_module.sleep_forever, timeout=10.0))
    call = ToolCallRequest("t", "sleep_forever", {"pid_file": str(pid_file)})

    running = asyncio.create_task(ToolExecutor(registry).run([call]))
    pid = await _wait_for_pid(pid_file)
    [outcome] = await running

    assert outcome.kind is ErrorKind.TIMEOUT
    assert pid != os.getpid()
    assert _process_is_gone(pid)


async def test_cancelling_a_batch_kills_an_isolated_worker(
    registry: ToolRegistry, blocking_module: ModuleType, tmp_path: Path
) -> None:
    pid_file = tmp_path / "worker.pid"
    registry.register(IsolatedFunctionTool(blocking_module.sleep_forever))
    batch = ToolExecutor(registry).batch(
        [ToolCallRequest("t", "sleep_forever", {"pid_file": str(pid_file)})]
    )
    task = asyncio.create_task(batch.run())
    pid = await _wait_for_pid(pid_file)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert _process_is_gone(pid)
    assert batch.outcomes[0] is not None
    assert batch.outcomes[0].status is OutcomeStatus.CANCELLED


async def test_an_isolated_tool_returns_values_and_raises_by_type(
    registry: ToolRegistry, blocking_module: ModuleType
) -> None:
    registry.register(isolated_tool(read_only=True)(blocking_module.add))
    registry.register(IsolatedFunctionTool(blocking_module.fail))
    outcomes = await ToolExecutor(registry).run(
        [
            ToolCallRequest("a", "add", '{"a": "2", "b": 3}'),
            ToolCallRequest("b", "fail", {"message": "no disk"}),
        ]
    )

    assert outcomes[0].ok
    assert outcomes[0].value["sum"] == 5
    assert outcomes[0].value["pid"] != os.getpid()
    assert outcomes[1].kind is ErrorKind.EXECUTION_ERROR
    assert "ValueError: no disk" in outcomes[1].result.text


def test_isolation_refuses_functions_a_child_cannot_import() -> None:
    def local(x: int) -> int:
        return x

    async def coroutine(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="top level of an importable module"):
        IsolatedFunctionTool(local)
    coroutine.__qualname__ = "coroutine"
    with pytest.raises(ToolDefinitionError, match="async"):
        IsolatedFunctionTool(coroutine)


async def test_cancelling_mid_batch_keeps_finished_outcomes_and_reraises(
    registry: ToolRegistry,
) -> None:
    started = asyncio.Event()
    seen: list[str] = []

    @tool(read_only=True)
    async def quick() -> str:
        return "done"

    @tool(read_only=True)
    async def stuck() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("stuck saw the cancel")
            raise
        return "never"

    @tool
    async def later() -> str:
        seen.append("later ran")
        return "never"

    for item in (quick, stuck, later):
        registry.register(item)
    batch = ToolExecutor(registry).batch(
        [
            ToolCallRequest("a", "quick", {}),
            ToolCallRequest("b", "stuck", {}),
            ToolCallRequest("c", "later", {}),
        ]
    )
    task = asyncio.create_task(batch.run())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    statuses = [o.status if o else None for o in batch.outcomes]
    assert statuses == [OutcomeStatus.OK, OutcomeStatus.CANCELLED, OutcomeStatus.CANCELLED]
    assert batch.outcomes[0] is not None and batch.outcomes[0].result.text == "done"
    assert batch.outcomes[1] is not None and batch.outcomes[1].kind is ErrorKind.CANCELLED
    assert seen == ["stuck saw the cancel"]


async def test_leaving_a_stream_early_cancels_the_calls_in_flight(registry: ToolRegistry) -> None:
    seen: list[str] = []

    @tool(read_only=True)
    async def stuck() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "never"

    registry.register(stuck)
    stream = ToolExecutor(registry).stream([ToolCallRequest("a", "stuck", {})])
    first = await anext(stream)
    await stream.aclose()

    assert first.summary() == {"name": "stuck", "status": "running", "detail": ""}
    assert seen == ["cancelled"]


async def test_a_tool_that_swallows_its_cancellation_still_times_out(
    registry: ToolRegistry,
) -> None:
    # The time limit cancels the tool; this one catches the cancellation and returns a
    # value anyway. The call went past its limit: it must not be reported as a success.
    class Stubborn(Tool):
        name = "stubborn"
        read_only = True
        timeout = 0.05

        async def execute(self, **kwargs: Any) -> str:
            try:  # noqa: SIM105 - the misbehaviour under test, spelled out
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                pass
            return "finished anyway"

    registry.register(Stubborn())
    [outcome] = await ToolExecutor(registry).run([ToolCallRequest("t", "stubborn", {})])
    assert outcome.kind is ErrorKind.TIMEOUT
    assert "finished anyway" not in outcome.result.text


async def test_an_isolated_tool_starts_at_once_for_listeners_and_its_timeout_says_it_ran(
    registry: ToolRegistry, blocking_module: ModuleType, tmp_path: Path
) -> None:
    # An isolated tool is a sync function tool, so it said it defers its start (waits for a
    # worker thread), but it starts its child process at once and never asks: with a
    # listener its call never "started", and its timeout told the model that nothing of
    # it ran and that sending it again is safe, though the child ran until it was killed
    # (with a journal, its row stayed queued: a crash or a stop let it run again unasked).
    from toolbridge.core.registry import timeout_error
    from toolbridge.execution.outcomes import EventType

    pid_file = tmp_path / "worker.pid"
    isolated = IsolatedFunctionTool(blocking_module.sleep_forever, timeout=10.0)
    assert not isolated.defers_start
    registry.register(isolated)
    events: list[Any] = []
    executor = ToolExecutor(registry, listeners=[events.append])
    call = ToolCallRequest("t", "sleep_forever", {"pid_file": str(pid_file)})
    running = asyncio.create_task(executor.run([call]))
    pid = await _wait_for_pid(pid_file)
    [outcome] = await running

    assert outcome.kind is ErrorKind.TIMEOUT
    assert outcome.result.text == timeout_error("sleep_forever", 10.0).render()
    assert [e.type for e in events] == [EventType.CALL_STARTED, EventType.CALL_FINISHED]
    assert _process_is_gone(pid)


async def test_a_journaled_isolated_call_is_running_while_its_child_runs(
    registry: ToolRegistry, blocking_module: ModuleType, tmp_path: Path
) -> None:
    # Claimed queued (it said it defers its start) and never asking for its running mark,
    # its row stayed queued while the child ran: a crash or a stop then let the next run
    # run it again as the same attempt, without asking anyone.
    from toolbridge.journal import CallState, SQLiteJournal

    pid_file = tmp_path / "worker.pid"
    registry.register(IsolatedFunctionTool(blocking_module.sleep_forever, timeout=10.0))
    async with SQLiteJournal(tmp_path / "journal.sqlite3") as journal:
        executor = ToolExecutor(registry, journal=journal)
        call = ToolCallRequest("t", "sleep_forever", {"pid_file": str(pid_file)})
        running = asyncio.create_task(executor.run([call]))
        try:
            pid = await _wait_for_pid(pid_file)
            [entry] = await journal.entries()
            assert entry.state is CallState.RUNNING, entry.state
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        [entry] = await journal.entries()
    assert entry.state is CallState.INTERRUPTED or entry.state is CallState.RUNNING, entry
    assert _process_is_gone(pid)
