"""Issue 8 §1: every path that runs a tool keeps the tool's contract, and run() never raises."""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from toolbridge import (
    ErrorKind,
    JsonBlock,
    Outcomes,
    OutcomeStatus,
    TextBlock,
    ToolCallRequest,
    ToolDefinitionError,
    ToolExecutor,
    ToolRegistry,
    ToolResult,
    current_context,
    tool,
    tool_result_messages,
)
from toolbridge.execution.executor import ExecutionPolicy
from toolbridge.formats import anthropic, gemini, openai_responses


def _giving(value: Any) -> Any:
    def give() -> Any:
        return value

    return give


class Boom(BaseException):
    """Not an Exception: a tool raising it must still become an outcome."""


# --- ToolRegistry.execute / invoke honour the contract ---------------------------------


async def test_registry_execute_honours_the_tools_timeout(registry: ToolRegistry) -> None:
    finished: list[str] = []

    @tool(timeout=0.2)
    async def slow() -> str:
        try:
            await asyncio.sleep(3)
        finally:
            finished.append("stopped")
        return "done"

    registry.register(slow)
    result = await registry.execute("slow", {})
    assert result.is_error and result.error_kind is ErrorKind.TIMEOUT
    assert "time limit of 0.2 s" in result.text
    assert finished == ["stopped"]  # cancelled at the limit, not waited for


async def test_registry_execute_and_invoke_never_run_a_tool_that_needs_approval(
    registry: ToolRegistry,
) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        ran.append(path)
        return "deleted"

    registry.register(delete)
    result = await registry.execute("delete", {"path": "a"})
    assert result.is_error and result.error_kind is ErrorKind.APPROVAL_REQUIRED
    assert result.text.startswith("Error: the call to 'delete' needs the user's approval")
    invoked = await registry.invoke(registry.prepare_call("delete", {"path": "b"}))
    assert invoked.error_kind is ErrorKind.APPROVAL_REQUIRED
    assert ran == []


async def test_pending_approval_outcome_carries_the_same_error(registry: ToolRegistry) -> None:
    @tool(requires_approval=True)
    def delete(path: str) -> str:
        return f"deleted {path}"

    registry.register(delete)
    executor = ToolExecutor(registry)
    outcomes = await executor.run([ToolCallRequest("1", "delete", {"path": "a"})])
    [pending] = outcomes.pending
    assert pending.kind is ErrorKind.APPROVAL_REQUIRED
    assert pending.result.error_kind is ErrorKind.APPROVAL_REQUIRED
    executor.approve(pending)
    again = await executor.run([o.call for o in outcomes.pending])
    assert again[0].ok and again[0].result.text == "deleted a" and not again.pending


# --- run() never raises for a tool -----------------------------------------------------


async def test_a_base_exception_from_a_tool_becomes_an_outcome(registry: ToolRegistry) -> None:
    @tool
    async def explode_async() -> str:
        raise Boom("async")

    @tool
    def explode_sync() -> str:
        raise Boom("in a thread")

    @tool
    def fine() -> str:
        return "fine"

    registry.register(explode_async)
    registry.register(explode_sync)
    registry.register(fine)
    outcomes = await ToolExecutor(registry).run(
        [
            ToolCallRequest("1", "explode_async", {}),
            ToolCallRequest("2", "explode_sync", {}),
            ToolCallRequest("3", "fine", {}),
        ]
    )
    assert [o.kind for o in outcomes] == [ErrorKind.EXECUTION_ERROR] * 2 + [None]
    assert "Boom: async" in outcomes[0].result.text
    assert "Boom: in a thread" in outcomes[1].result.text
    assert (await registry.execute("explode_async", {})).error_kind is ErrorKind.EXECUTION_ERROR


def test_keyboard_interrupt_stops_the_run_after_cancelling_and_awaiting_siblings(
    registry: ToolRegistry,
) -> None:
    events: list[str] = []

    @tool(read_only=True)
    async def interrupt() -> str:
        await asyncio.sleep(0.01)
        raise KeyboardInterrupt

    @tool(read_only=True)
    async def sibling(i: int) -> str:
        try:
            await asyncio.sleep(30)
        finally:
            events.append(f"sibling {i} stopped")
        return "never"

    @tool(read_only=True)
    async def quick() -> str:
        return "quick"

    registry.register(interrupt)
    registry.register(sibling)
    registry.register(quick)
    calls = [
        ToolCallRequest("q", "quick", {}),
        ToolCallRequest("s1", "sibling", {"i": 1}),
        ToolCallRequest("x", "interrupt", {}),
        ToolCallRequest("s2", "sibling", {"i": 2}),
    ]
    kept = Outcomes()

    async def main() -> None:
        try:
            await ToolExecutor(registry).run(calls, into=kept)
        finally:
            # still inside the loop: every sibling was already stopped and awaited
            events.append(f"run ended with {len(asyncio.all_tasks()) - 1} other tasks")

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert sorted(events[:2]) == ["sibling 1 stopped", "sibling 2 stopped"]
    assert events[2] == "run ended with 0 other tasks"
    assert [o.call.id for o in kept] == ["q", "s1", "x", "s2"]
    assert kept[0].ok
    assert [o.status for o in kept[1:]] == [OutcomeStatus.CANCELLED] * 3


def test_system_exit_from_a_sync_tool_in_order_still_answers_every_call(
    registry: ToolRegistry,
) -> None:
    ran: list[str] = []

    @tool
    def first() -> str:
        return "first"

    @tool
    def leave() -> str:
        raise SystemExit(3)

    @tool
    def after() -> str:
        ran.append("after")
        return "after"

    for made in (first, leave, after):
        registry.register(made)
    kept = Outcomes()
    calls = [ToolCallRequest(n, n, {}) for n in ("first", "leave", "after")]
    with pytest.raises(SystemExit):
        asyncio.run(ToolExecutor(registry).run(calls, into=kept))
    assert [o.status for o in kept] == [
        OutcomeStatus.OK,
        OutcomeStatus.CANCELLED,
        OutcomeStatus.CANCELLED,
    ]
    assert ran == []  # nothing starts after the stop


async def test_unsendable_results_become_execution_errors_and_still_render(
    registry: ToolRegistry,
) -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    returns: dict[str, Any] = {
        "tuple_keys": ToolResult([JsonBlock({(1, 2): "x"})]),
        "cycle_block": JsonBlock(cycle),
        "cycle_data": {"a": cycle},
        "wrong_content": ToolResult(42),  # type: ignore[arg-type]
        "not_blocks": ToolResult([TextBlock("ok"), "loose text"]),  # type: ignore[list-item]
        "good_blocks": [TextBlock("a"), JsonBlock({"b": 1})],
    }
    for name, value in returns.items():
        registry.register(tool(name=name)(_giving(value)))
    outcomes = await ToolExecutor(registry).run([ToolCallRequest(n, n, {}) for n in returns])
    *bad, good = outcomes
    assert all(o.kind is ErrorKind.EXECUTION_ERROR for o in bad)
    assert all("cannot be sent back" in o.result.text for o in bad)
    assert "JsonBlock value cannot be written as JSON" in bad[0].result.text
    assert "content must be a str or a list" in bad[3].result.text
    assert good.ok
    for render in (
        tool_result_messages,
        anthropic.result_messages,
        gemini.result_messages,
        openai_responses.result_messages,
    ):
        assert len(render(outcomes)) >= 1  # never raises on what run() produced


# --- the outcomes of a run: one object ---------------------------------------------------


async def test_run_returns_outcomes_with_the_fatal_one(registry: ToolRegistry) -> None:
    @tool
    def fail() -> str:
        raise ValueError("no")

    @tool
    def fine() -> str:
        return "fine"

    registry.register(fail)
    registry.register(fine)
    executor = ToolExecutor(registry, ExecutionPolicy(fail_on_tool_error=True))
    outcomes = await executor.run(
        [ToolCallRequest("1", "fine", {}), ToolCallRequest("2", "fail", {})]
    )
    assert isinstance(outcomes, list) and isinstance(outcomes, Outcomes)
    assert outcomes.fatal is outcomes[1]
    assert (await executor.run([ToolCallRequest("3", "fine", {})])).fatal is None


async def test_a_cancelled_run_fills_the_outcomes_object_it_returns(
    registry: ToolRegistry,
) -> None:
    @tool
    async def quick() -> str:
        return "quick"

    started = asyncio.Event()

    @tool
    async def hang() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    registry.register(quick)
    registry.register(hang)
    kept = Outcomes()
    calls = [ToolCallRequest("1", "quick", {}), ToolCallRequest("2", "hang", {})]
    task = asyncio.create_task(ToolExecutor(registry).run(calls, into=kept))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [o.status for o in kept] == [OutcomeStatus.OK, OutcomeStatus.CANCELLED]


# --- isolated tools in their decorator form --------------------------------------------

DECORATED_MODULE = """
import os

from toolbridge import isolated_tool


@isolated_tool(read_only=True, timeout=30)
def where(x: int) -> dict:
    '''Double x in a child process.

    Args:
        x: A number.
    '''
    return {"double": 2 * x, "pid": os.getpid()}
"""


@pytest.fixture
def decorated_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    folder = tmp_path / "decorated"
    folder.mkdir()
    name = f"tb_decorated_{abs(hash(str(tmp_path))) % 10**8}"
    (folder / f"{name}.py").write_text(textwrap.dedent(DECORATED_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


async def test_isolated_tool_works_as_a_decorator_in_a_real_child(
    registry: ToolRegistry, decorated_module: ModuleType
) -> None:
    import json
    import os

    registry.register(decorated_module.where)
    [outcome] = await ToolExecutor(registry).run([ToolCallRequest("1", "where", {"x": "21"})])
    assert outcome.ok, outcome.result.text
    value = json.loads(outcome.result.text)
    assert value["double"] == 42 and value["pid"] != os.getpid()


def test_isolated_tool_refuses_a_function_the_child_cannot_import() -> None:
    from toolbridge import isolated_tool

    def local() -> str:
        return "x"

    with pytest.raises(ToolDefinitionError, match="top level of an importable module"):
        isolated_tool()(local)
    with pytest.raises(ToolDefinitionError, match="cannot be inline"):
        isolated_tool(inline=True)(len)


# --- sync tools inline on the loop -----------------------------------------------------


async def test_an_inline_sync_tool_runs_on_the_loop_with_its_context(
    registry: ToolRegistry,
) -> None:
    threads: dict[str, int] = {}

    @tool(inline=True)
    def on_loop(x: int) -> str:
        threads["inline"] = threading.get_ident()
        return f"{x} in {current_context().call_id}"

    @tool
    def in_thread() -> str:
        threads["thread"] = threading.get_ident()
        return "thread"

    registry.register(on_loop)
    registry.register(in_thread)
    outcomes = await ToolExecutor(registry).run(
        [ToolCallRequest("c1", "on_loop", {"x": "7"}), ToolCallRequest("c2", "in_thread", {})]
    )
    assert outcomes[0].result.text == "7 in c1"
    assert threads["inline"] == threading.get_ident() != threads["thread"]


def test_inline_is_refused_for_async_functions() -> None:
    async def already_async() -> str:
        return "x"

    with pytest.raises(ToolDefinitionError, match="inline=True is for sync functions"):
        tool(inline=True)(already_async)
