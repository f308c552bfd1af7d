"""Regressions found in review: each test failed before its fix."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from toolbridge import (
    ErrorKind,
    EventType,
    ExecutionPolicy,
    NetworkViolation,
    OutcomeStatus,
    ToolCallRequest,
    ToolEvent,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.execution.result_store import ResultStore


async def test_an_unencodable_long_result_is_still_an_outcome(registry: ToolRegistry) -> None:
    @tool
    async def surrogate() -> str:
        return "x" * 40_000 + "\ud800"

    registry.register(surrogate)
    [outcome] = await ToolExecutor(registry).run([ToolCallRequest("s", "surrogate", {})])
    assert outcome.status is OutcomeStatus.OK
    assert "read_tool_result" in outcome.result.text  # previewed and saved


async def test_a_broken_approval_rule_refuses_the_call(registry: ToolRegistry) -> None:
    ran = False

    @tool
    async def act() -> str:
        nonlocal ran
        ran = True
        return "done"

    def rule(tool_: Any, args: Any) -> bool:
        raise RuntimeError("rule bug")

    registry.register(act)
    executor = ToolExecutor(registry, ExecutionPolicy(approval=rule))
    [outcome] = await executor.run([ToolCallRequest("a", "act", {})])
    assert outcome.kind is ErrorKind.APPROVAL_DENIED
    assert not ran


async def test_a_refused_target_blocks_only_calls_that_name_it(registry: ToolRegistry) -> None:
    @tool
    async def fetch(url: str) -> str:
        raise NetworkViolation("blocked", target=url)

    @tool
    async def echo(text: str) -> str:
        return text

    registry.register(fetch)
    registry.register(echo)
    executor = ToolExecutor(registry)
    for i in range(3):
        await executor.run([ToolCallRequest(f"f{i}", "fetch", {"url": "/"})])
    [echo_outcome, again] = await executor.run(
        [
            ToolCallRequest("e", "echo", {"text": "a/b"}),
            ToolCallRequest("f", "fetch", {"url": "/"}),
        ]
    )
    assert echo_outcome.status is OutcomeStatus.OK
    assert again.kind is ErrorKind.REPEATED_CALL


async def test_a_skipped_call_does_not_use_up_its_approval(registry: ToolRegistry) -> None:
    @tool
    async def fail() -> str:
        raise RuntimeError("no")

    @tool(requires_approval=True)
    async def delete(path: str) -> str:
        return f"deleted {path}"

    registry.register(fail)
    registry.register(delete)
    executor = ToolExecutor(registry, ExecutionPolicy(fail_on_tool_error=True))
    [pending] = await executor.run([ToolCallRequest("d", "delete", {"path": "x"})])
    assert pending.status is OutcomeStatus.PENDING_APPROVAL
    executor.approve(pending)
    failed, skipped = await executor.run(
        [ToolCallRequest("f", "fail", {}), ToolCallRequest("d", "delete", {"path": "x"})]
    )
    assert failed.fatal and skipped.status is OutcomeStatus.SKIPPED
    [ran] = await executor.run([ToolCallRequest("d", "delete", {"path": "x"})])
    assert ran.status is OutcomeStatus.OK and ran.result.text == "deleted x"


async def test_the_loop_guard_applies_within_one_batch(registry: ToolRegistry) -> None:
    runs = 0

    @tool
    async def flaky(n: int) -> str:
        nonlocal runs
        runs += 1
        raise RuntimeError("still broken")

    registry.register(flaky)
    calls = [ToolCallRequest(f"c{i}", "flaky", {"n": 1}) for i in range(5)]
    outcomes = await ToolExecutor(registry).run(calls)
    assert runs == 2
    assert [o.kind for o in outcomes[2:]] == [ErrorKind.REPEATED_CALL] * 3


async def test_a_call_starts_only_when_it_has_a_slot(registry: ToolRegistry) -> None:
    @tool(read_only=True)
    async def quick(n: int) -> int:
        return n

    registry.register(quick)
    events: list[ToolEvent] = []
    executor = ToolExecutor(registry, ExecutionPolicy(max_concurrency=1), listeners=[events.append])
    await executor.run([ToolCallRequest(f"c{i}", "quick", {"n": i}) for i in range(4)])
    running = peak = 0
    for event in events:
        running += 1 if event.type is EventType.CALL_STARTED else -1
        peak = max(peak, running)
    assert peak == 1 and len(events) == 8


def test_count_pruning_keeps_other_sessions_results(workspace: Path) -> None:
    other = ResultStore(workspace, "other", max_count=2)
    kept = other.save("old", "from another session")
    busy = ResultStore(workspace, "busy", max_count=2)
    for i in range(5):
        busy.save(f"c{i}", "text")
    assert kept.exists()
    assert len(list(busy.directory.glob("*.txt"))) == 2
    stale = time.time() - 10 * 24 * 3600
    os.utime(kept, (stale, stale))
    busy.save("c9", "text")
    assert not kept.exists()  # age applies to every session


async def test_a_fifo_planted_as_a_saved_result_is_refused(
    registry: ToolRegistry, workspace: Path
) -> None:
    import asyncio

    from toolbridge.tools.tool_results import ReadToolResult

    store = ResultStore(workspace, "test-session")
    store.directory.mkdir(parents=True)
    os.mkfifo(store.path_for("x"))
    registry.register(ReadToolResult())
    async with asyncio.timeout(30):  # a hang guard only: the call must not block on the FIFO
        result = await registry.execute("read_tool_result", {"call_id": "x"})
    assert result.is_error and "no saved result for call id 'x'" in result.text


def test_pruning_never_follows_a_linked_session_folder(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    precious = outside / "diary.txt"
    precious.write_text("keep me")
    stale = time.time() - 30 * 24 * 3600
    os.utime(precious, (stale, stale))
    store = ResultStore(workspace, "s", max_count=1)
    store.save("first", "text")
    (store.root / "evil").symlink_to(outside, target_is_directory=True)
    store.save("second", "text")
    assert precious.read_text() == "keep me"


async def test_a_call_whose_arguments_break_preparation_is_still_an_outcome(
    registry: ToolRegistry,
) -> None:
    # A key whose repr raises broke the argument check itself; run() raised instead of
    # settling the call (and dropped the outcomes of the calls around it).
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("repr refused")

    @tool
    async def echo(x: int) -> int:
        return x

    registry.register(echo)
    calls = [
        ToolCallRequest("a", "echo", {"x": 1}),
        ToolCallRequest("b", "echo", {Hostile(): 1}),
        ToolCallRequest("c", "echo", {"x": 3}),
    ]
    outcomes = await ToolExecutor(registry).run(calls)
    assert [outcome.call.id for outcome in outcomes] == ["a", "b", "c"]
    assert [outcome.status for outcome in outcomes] == [
        OutcomeStatus.OK,
        OutcomeStatus.ERROR,
        OutcomeStatus.OK,
    ]
    error = outcomes[1].error
    assert error is not None and error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "could not be checked" in error.message
