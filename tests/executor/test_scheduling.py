"""Scheduling: call order, concurrent groups, exclusive tools, the concurrency cap."""

from __future__ import annotations

import asyncio
import time

from toolbridge import ToolCallRequest, ToolRegistry, tool
from toolbridge.execution.executor import ExecutionPolicy, OutcomeStatus, ToolExecutor


def _calls(name: str, count: int, prefix: str = "c") -> list[ToolCallRequest]:
    return [ToolCallRequest(f"{prefix}{i}", name, {"i": i}) for i in range(count)]


async def test_outcomes_come_back_in_call_order_when_calls_finish_in_reverse(
    registry: ToolRegistry,
) -> None:
    finished: list[int] = []
    gates = [asyncio.Event() for _ in range(4)]

    @tool(read_only=True)
    async def step(i: int) -> int:
        # Call i waits for call i+1 to finish, so they finish 3, 2, 1, 0.
        if i + 1 < len(gates):
            await gates[i + 1].wait()
        finished.append(i)
        gates[i].set()
        return i * 10

    registry.register(step)
    outcomes = await ToolExecutor(registry).run(_calls("step", 4))

    assert finished == [3, 2, 1, 0]
    assert [o.call.id for o in outcomes] == ["c0", "c1", "c2", "c3"]
    assert [o.value for o in outcomes] == [0, 10, 20, 30]
    assert [o.result.text for o in outcomes] == ["0", "10", "20", "30"]


async def test_a_group_of_200_safe_calls_really_runs_together(
    registry: ToolRegistry, in_flight
) -> None:
    everyone_in = asyncio.Event()

    @tool(read_only=True)
    async def wait_for_all(i: int) -> int:
        in_flight.enter()
        if in_flight.now == 200:
            everyone_in.set()
        await everyone_in.wait()  # deadlocks unless all 200 are in flight at once
        in_flight.leave()
        return i

    registry.register(wait_for_all)
    async with asyncio.timeout(30):  # a hang guard only; nothing here measures time
        outcomes = await ToolExecutor(registry).run(_calls("wait_for_all", 200))

    assert in_flight.peak == 200
    assert all(o.ok for o in outcomes)


async def test_unsafe_calls_run_alone_and_in_order(registry: ToolRegistry, in_flight) -> None:
    order: list[str] = []

    @tool(read_only=True)
    async def read(i: int) -> None:
        in_flight.enter()
        await asyncio.sleep(0)
        order.append(f"read{i}")
        in_flight.leave()

    @tool
    async def write(i: int) -> None:
        in_flight.enter()
        assert in_flight.now == 1, "a write overlapped another call"
        await asyncio.sleep(0)
        order.append(f"write{i}")
        in_flight.leave()

    registry.register(read)
    registry.register(write)
    batch = [
        ToolCallRequest("a", "read", {"i": 0}),
        ToolCallRequest("b", "read", {"i": 1}),
        ToolCallRequest("c", "write", {"i": 2}),
        ToolCallRequest("d", "read", {"i": 3}),
        ToolCallRequest("e", "write", {"i": 4}),
    ]
    outcomes = await ToolExecutor(registry).run(batch)

    assert all(o.ok for o in outcomes)
    assert set(order[:2]) == {"read0", "read1"}
    assert order[2:] == ["write2", "read3", "write4"]


async def test_concurrency_off_runs_everything_one_at_a_time(
    registry: ToolRegistry, in_flight
) -> None:
    @tool(read_only=True)
    async def read(i: int) -> int:
        in_flight.enter()
        await asyncio.sleep(0)
        in_flight.leave()
        return i

    registry.register(read)
    executor = ToolExecutor(registry, ExecutionPolicy(concurrency=False))
    outcomes = await executor.run(_calls("read", 20))

    assert in_flight.peak == 1
    assert [o.value for o in outcomes] == list(range(20))


async def test_an_exclusive_tool_never_overlaps_anything_even_across_batches(
    registry: ToolRegistry,
) -> None:
    spans: list[tuple[str, float, float]] = []

    @tool(read_only=True)
    async def read(i: int) -> None:
        start = time.perf_counter()
        for _ in range(3):
            await asyncio.sleep(0)
        spans.append(("read", start, time.perf_counter()))

    @tool(exclusive=True)
    async def migrate(i: int) -> None:
        start = time.perf_counter()
        for _ in range(3):
            await asyncio.sleep(0)
        spans.append(("migrate", start, time.perf_counter()))

    registry.register(read)
    registry.register(migrate)
    executor = ToolExecutor(registry)
    first = [*_calls("read", 5, "a"), ToolCallRequest("x", "migrate", {"i": 0})]
    second = [*_calls("read", 5, "b"), ToolCallRequest("y", "migrate", {"i": 1})]
    results = await asyncio.gather(executor.run(first), executor.run(second))

    assert all(o.ok for batch in results for o in batch)
    exclusive = [(s, e) for name, s, e in spans if name == "migrate"]
    assert len(exclusive) == 2
    for start, end in exclusive:
        overlapping = [
            (name, s, e) for name, s, e in spans if (s, e) != (start, end) and s < end and e > start
        ]
        assert overlapping == []


async def test_max_concurrency_caps_the_async_path_for_the_whole_executor(
    registry: ToolRegistry, in_flight
) -> None:
    @tool(read_only=True)
    async def read(i: int) -> int:
        in_flight.enter()
        for _ in range(3):
            await asyncio.sleep(0)
        in_flight.leave()
        return i

    registry.register(read)
    executor = ToolExecutor(registry, ExecutionPolicy(max_concurrency=5))
    first, second = await asyncio.gather(
        executor.run(_calls("read", 40, "a")), executor.run(_calls("read", 40, "b"))
    )

    assert in_flight.peak == 5
    assert in_flight.started == 80
    assert all(o.status is OutcomeStatus.OK for o in first + second)
