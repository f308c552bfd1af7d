"""The same batch on the local backend and on Ray reads the same, byte for byte; progress
reaches the caller from workers; a call no worker can take ends within its limit."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
from toolbridge.backends import ExecutionBackend, LocalBackend
from toolbridge.backends.ray import RayBackend, ToolSource
from toolbridge.execution.outcomes import EventType, ToolEvent, ToolOutcome

SOURCE = ToolSource("parity_tools:build")
TIMING_KEYS = {"started_at", "duration"}


@pytest.fixture(scope="module")
def ray_backend(ray_runtime: None) -> Iterator[RayBackend]:
    # grace: only a real hang (a worker silent 10 s past a call's limit) kills a worker here
    backend = RayBackend(SOURCE, workers=2, grace=10)
    # Up before the tests: a call's limit counts the wait for a worker, and a cold
    # start on a busy machine takes longer than the 0.5 s limit of the slow tool.
    backend.start()
    yield backend
    backend.close()


async def run_one(
    workspace: Path, backend: ExecutionBackend, call: ToolCallRequest
) -> tuple[ToolOutcome, list[ToolEvent]]:
    """Run `call` alone on `backend`: its outcome, and the events its run gave."""
    events: list[ToolEvent] = []
    [outcome] = await executor_for(workspace, backend, events).run([call])
    return outcome, events


def executor_for(
    workspace: Path, backend: ExecutionBackend, events: list[ToolEvent] | None = None
) -> ToolExecutor:
    registry = SOURCE.registry(ToolContext(workspace=workspace, session="parity"))
    policy = ExecutionPolicy(max_result_chars=1_000, preview_chars=200, loop_guard=False)
    listeners = [events.append] if events is not None else []
    return ToolExecutor(registry, policy, backend=backend, listeners=listeners)


BATCH = [
    ToolCallRequest("ok", "add", {"a": 2, "b": "40"}),
    ToolCallRequest("refused", "refuse", {"path": "notes.txt"}),
    ToolCallRequest("error-result", "error_result", {"path": "db.lock"}),
    ToolCallRequest("invalid", "add", {"a": "two", "b": 1}),
    ToolCallRequest("unknown", "ad", {"a": 1, "b": 2}),
    ToolCallRequest("slow", "too_slow", {"seconds": 30}),
    ToolCallRequest("crash", "crash", {"message": "bad input: 7"}),
    ToolCallRequest("malformed", "malformed", {}),
    ToolCallRequest("long", "long_text", {"chars": 5_000}),
    ToolCallRequest("steps", "steps", {"count": 3}),
    ToolCallRequest("self-cancel", "cancels_itself", {"reason": "its own future was cancelled"}),
    ToolCallRequest("unreadable", "unreadable_error", {}),  # its exception's __str__ raises
    ToolCallRequest("objects", "refuse_with_objects", {"path": "notes.txt"}),
    ToolCallRequest(1, "call_id_seen", {}),  # a model's id that is a number: passed as it is
    ToolCallRequest(0, "call_id_seen", {}),
]


def comparable(outcome: ToolOutcome) -> dict[str, Any]:
    """Everything the model or the caller reads of an outcome, except timings."""
    result = outcome.result
    return {
        "call": outcome.call.id,
        "status": outcome.status,
        "content": result.content,
        "is_error": result.is_error,
        "error_kind": result.error_kind,
        "metadata": {k: v for k, v in result.metadata.items() if k not in TIMING_KEYS},
        "error": outcome.error,
        "value": outcome.value,
        "repairs": outcome.repairs,
        "fatal": outcome.fatal,
        "approval": outcome.approval,
    }


def progress_of(events: list[ToolEvent]) -> list[tuple[str, float, float | None, str | None]]:
    return [
        (e.call.id, e.progress.progress, e.progress.total, e.progress.message)
        for e in events
        if e.type is EventType.CALL_PROGRESS and e.progress is not None
    ]


async def test_one_batch_reads_the_same_on_both_backends(
    workspace: Path, ray_backend: RayBackend
) -> None:
    runs: dict[str, tuple[list[dict[str, Any]], list[ToolEvent]]] = {}
    for name, backend in (("local", LocalBackend()), ("ray", ray_backend)):
        events: list[ToolEvent] = []
        outcomes = await executor_for(workspace, backend, events).run(BATCH)
        runs[name] = ([comparable(o) for o in outcomes], events)
    (local, local_events), (ray, ray_events) = runs["local"], runs["ray"]
    kinds = [row["error_kind"] for row in local]
    assert kinds == [
        None, "execution_error", "execution_error", "invalid_arguments", "unknown_tool",
        "timeout", "execution_error", "execution_error", None, None, "execution_error",
        "execution_error", "execution_error", None, None,
    ]  # fmt: skip
    assert [row["content"] for row in local[-2:]] == ["1", "0"]
    assert "CancelledError: its own future was cancelled" in str(local[10]["content"])
    assert "_Unreadable: (its text cannot be read" in str(local[11]["content"])
    assert local[12]["content"] == "Error: notes.txt\n404"
    assert "read_tool_result" in str(local[8]["content"])  # the long one was capped and saved
    for here, there in zip(local, ray, strict=True):
        assert here == there
    assert progress_of(ray_events) == progress_of(local_events)
    finished = [(e.call.id, e.status, e.detail) for e in ray_events if e.type == "call_finished"]
    assert sorted(finished, key=repr) == sorted(
        ((e.call.id, e.status, e.detail) for e in local_events if e.type == "call_finished"),
        key=repr,
    )


async def test_progress_from_a_worker_reaches_the_stream_in_order(
    workspace: Path, ray_backend: RayBackend
) -> None:
    executor = executor_for(workspace, ray_backend)
    batch = [
        ToolCallRequest("a", "steps", {"count": 5}),
        ToolCallRequest("b", "steps", {"count": 3}),
    ]
    events = [event async for event in executor.stream(batch)]
    for call_id, count in (("a", 5), ("b", 3)):
        mine = [e for e in events if e.call.id == call_id]
        assert [e.type for e in mine] == [
            EventType.CALL_STARTED,
            *[EventType.CALL_PROGRESS] * count,
            EventType.CALL_FINISHED,
        ]
        assert [(p[1], p[2], p[3]) for p in progress_of(mine)] == [
            (step, count, f"step {step} of {count}") for step in range(1, count + 1)
        ]


async def test_a_call_no_worker_can_take_ends_within_its_limit(
    workspace: Path, ray_runtime: None
) -> None:
    backend = RayBackend(SOURCE, workers=1, start_timeout=1.5)
    try:
        executor = executor_for(workspace, backend)
        batch = [
            ToolCallRequest("q", "needs_quantum", {}),
            ToolCallRequest("n", "needs_quantum_no_limit", {}),
        ]
        # A real hang (the limit starting only once a worker took the call) reaches this.
        limited, unlimited = await asyncio.wait_for(executor.run(batch), 60)
    finally:
        backend.close()
    for outcome in (limited, unlimited):
        assert outcome.kind == "execution_error", outcome.result.text
        assert "no worker offers resource 'quantum_chip'" in outcome.result.text
        assert "did not run" in outcome.result.text


async def test_a_worker_failure_whose_text_cannot_be_read_is_answered_not_left_to_hang(
    workspace: Path, ray_backend: RayBackend
) -> None:
    executor = executor_for(workspace, ray_backend)
    call = ToolCallRequest("x", "exits_unreadably", {})  # no time limit: a hang is forever
    [outcome] = await asyncio.wait_for(executor.run([call]), 60)
    assert outcome.result.text.startswith(
        "Error: the worker running 'exits_unreadably' failed outside the tool: SystemExit: "
        "(its text cannot be read: str() raised RuntimeError)."
    )


async def test_a_call_no_worker_can_take_does_not_hold_back_calls_to_workers_that_are_up(
    workspace: Path, ray_backend: RayBackend
) -> None:
    # While a call waits for a pool with no worker, the backend looks for one less and less
    # often (up to every 0.25 s); a call to a pool that is up must not wait for that look.
    stuck = asyncio.create_task(
        executor_for(workspace, ray_backend).run([ToolCallRequest("q", "needs_quantum", {})])
    )
    registry = SOURCE.registry(ToolContext(workspace=workspace, session="parity"))
    policy = ExecutionPolicy(default_timeout=0.2, loop_guard=False)
    quick = ToolExecutor(registry, policy, backend=ray_backend)
    kinds = []
    while not stuck.done():  # the 1.5 s of needs_quantum's limit, one quick call at a time
        [outcome] = await quick.run([ToolCallRequest(f"a{len(kinds)}", "add", {"a": 1, "b": 2})])
        kinds.append(outcome.result.text if outcome.kind else None)
    [waited] = await stuck
    assert "no worker offers resource 'quantum_chip'" in waited.result.text
    assert len(kinds) > 5 and kinds == [None] * len(kinds)


@pytest.mark.parametrize("name", ["needs_huge_memory", "needs_huge_sandbox"])
async def test_an_amount_past_what_ray_can_hold_is_a_resource_no_worker_offers(
    workspace: Path, ray_runtime: None, name: str
) -> None:
    # Ray keeps a resource amount as a 64-bit count of ten-thousandths: 10**15 wrapped
    # round to a negative demand, which every node met, and the tool ran.
    backend = RayBackend(SOURCE, workers=1)
    try:
        executor = executor_for(workspace, backend)
        [outcome] = await asyncio.wait_for(executor.run([ToolCallRequest("m", name, {})]), 60)
    finally:
        backend.close()
    resource = "memory" if name == "needs_huge_memory" else "sandbox"
    assert outcome.kind == "execution_error", outcome.result.text
    assert f"no worker offers resource '{resource}'" in outcome.result.text
    assert "did not run" in outcome.result.text


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("needs_nan_memory", "nan of resource 'memory'"),
        ("needs_negative_cpus", "-1 of resource 'num_cpus'"),
    ],
)
async def test_an_amount_that_is_not_one_fails_the_call_saying_which(
    workspace: Path, ray_runtime: None, name: str, shown: str
) -> None:
    # Ray's own error named neither the tool nor the resource ("cannot convert float NaN
    # to integer"), and came through as the executor failing.
    backend = RayBackend(SOURCE, workers=1)
    try:
        executor = executor_for(workspace, backend)
        [outcome] = await asyncio.wait_for(executor.run([ToolCallRequest("m", name, {})]), 60)
        tool = executor.registry.get(name)
        assert tool is not None
        with pytest.raises(ValueError, match=f"tool '{name}' cannot run on Ray: .*{shown}"):
            backend.start([tool], timeout=30)
    finally:
        backend.close()
    assert outcome.kind == "execution_error", outcome.result.text
    assert f"tool '{name}' cannot run on Ray: it asks Ray for {shown}" in outcome.result.text
    assert "did not run" in outcome.result.text


async def test_a_result_whose_metadata_cannot_be_pickled_fails_no_other_call(
    workspace: Path, ray_backend: RayBackend
) -> None:
    batch = [ToolCallRequest("locked", "locked_metadata", {}), *BATCH[:2]]
    runs = [await executor_for(workspace, b).run(batch) for b in (LocalBackend(), ray_backend)]
    local, ray = ([comparable(o) for o in outcomes] for outcomes in runs)
    assert local[0]["content"] == "fine" and "lock" in local[0]["metadata"]
    # The lock stays on its worker, as does the value (the result itself); the rest goes.
    assert ray[0]["metadata"] == {"kept": 1} and ray[0]["value"] is None
    del local[0]["metadata"]["lock"], local[0]["value"], ray[0]["value"]
    assert local == ray


@pytest.mark.parametrize("backend_name", ["local", "ray"])
async def test_a_long_progress_message_is_cut_the_same_on_both_backends(
    workspace: Path, ray_backend: RayBackend, backend_name: str
) -> None:
    from toolbridge.execution.progress import MAX_PROGRESS_MESSAGE

    backend = LocalBackend() if backend_name == "local" else ray_backend
    outcome, events = await run_one(
        workspace, backend, ToolCallRequest("c", "chatty", {"chars": 100_000})
    )
    assert outcome.value == "said"
    [(_, done, total, message)] = progress_of(events)
    assert (done, total) == (1, 2)
    assert message is not None
    assert len(message) == MAX_PROGRESS_MESSAGE
    assert message.startswith("x" * (MAX_PROGRESS_MESSAGE // 2))
    assert message.endswith("[progress message cut: 100,000 characters]")


@pytest.mark.parametrize("backend_name", ["local", "ray"])
async def test_progress_values_no_json_number_holds_are_settled_the_same_on_both_backends(
    workspace: Path, ray_backend: RayBackend, backend_name: str
) -> None:
    import json

    backend = LocalBackend() if backend_name == "local" else ray_backend
    outcome, events = await run_one(workspace, backend, ToolCallRequest("o", "odd_numbers", {}))
    assert outcome.value == "odd"
    # A report whose progress is not a finite number is dropped; a total that is not one
    # is unknown (None).
    assert progress_of(events) == [
        ("o", 1.0, None, "nan total"),
        ("o", 2.0, None, "inf total"),
        ("o", 3.0, None, "huge total"),
        ("o", 4.0, 10.0, "plain"),
    ]
    json.dumps(progress_of(events), allow_nan=False)  # what an MCP server sends on


async def test_a_worker_keeps_a_bounded_tail_of_each_calls_progress() -> None:
    from toolbridge.backends.ray.wire import ANSWER, PROGRESS
    from toolbridge.backends.ray.worker import _Outbox
    from toolbridge.execution.progress import MAX_PENDING_PROGRESS, ToolProgress

    outbox = _Outbox()
    for step in range(1, 1001):  # faster than the caller takes them
        outbox.report(0, ToolProgress(step, 1000))
        outbox.report(1, ToolProgress(-step))
    outbox.answer(0, ANSWER, "done")
    chunk = await outbox.take()
    first = [payload for position, kind, payload in chunk if position == 0]
    assert first[:-1] == [(s, 1000, None) for s in range(1001 - MAX_PENDING_PROGRESS, 1001)]
    assert first[-1] == "done"  # after its progress
    assert [kind for position, kind, _ in chunk if position == 1] == [PROGRESS] * 100
    outbox.report(1, ToolProgress(5))  # the next chunk carries only what came since
    assert await outbox.take() == [(1, PROGRESS, (5, None, None))]


async def test_a_call_that_will_not_stop_is_a_timeout_and_its_worker_goes(
    workspace: Path, ray_runtime: None
) -> None:
    from toolbridge.core.registry import timeout_error

    backend = RayBackend(SOURCE, workers=1, grace=0.5)
    try:
        backend.start()  # a cold start would take the 0.5 s limit (a call waits within it)
        executor = executor_for(workspace, backend)
        [outcome] = await asyncio.wait_for(
            executor.run([ToolCallRequest("s", "stubborn", {})]), 60
        )  # the tool never ends by itself: only the backend's grace ends the call
        assert outcome.result.text == timeout_error("stubborn", 0.5).render()
        stubborn_pid = int((workspace / "stubborn.pid").read_text())
        for _ in range(200):  # its worker process is killed (then Ray starts another)
            if not process_alive(stubborn_pid):
                break
            await asyncio.sleep(0.05)
        assert not process_alive(stubborn_pid)
    finally:
        backend.close()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("name", "resource"), [("NeedsQuantum", "quantum_chip"), ("NeedsHugeMemory", "memory")]
)
def test_start_says_which_resource_no_node_offers(
    ray_runtime: None, name: str, resource: str
) -> None:
    import parity_tools

    backend = RayBackend(SOURCE, workers=1)
    try:
        with pytest.raises(TimeoutError, match=f"no node offers '{resource}'"):
            backend.start([getattr(parity_tools, name)()], timeout=1)
    finally:
        backend.close()


def test_the_largest_amount_is_rays_own() -> None:
    import ray

    from toolbridge.backends.ray.pool import RAY_MAX_AMOUNT

    scaling = ray._raylet.RESOURCE_UNIT_SCALING
    assert (RAY_MAX_AMOUNT + 1) * scaling > 2**63 - 1 >= RAY_MAX_AMOUNT * scaling


async def test_a_full_worker_keeps_calls_waiting_within_their_limit(
    workspace: Path, ray_runtime: None
) -> None:
    from toolbridge.core.registry import timeout_error

    backend = RayBackend(SOURCE, workers=1, max_calls_per_worker=1, grace=10)
    try:
        backend.start()
        executor = executor_for(workspace, backend)
        [before] = await executor.run([ToolCallRequest("p", "pid", {})])
        slow = [ToolCallRequest(f"s{i}", "too_slow", {"seconds": 30}) for i in range(2)]
        outcomes = await asyncio.wait_for(executor.run(slow), 60)
        # One ran, one waited for the worker's only slot: both end at the limit, and the
        # one that waited says it never started.
        assert [o.result.text for o in outcomes] == [
            timeout_error("too_slow", 0.5).render(),
            timeout_error("too_slow", 0.5, started=False).render(),
        ]
        [after] = await executor.run([ToolCallRequest("p", "pid", {})])
        assert after.value == before.value  # waiting is not hanging: the worker was kept
    finally:
        backend.close()


async def test_the_loop_guard_reads_a_workers_refusals_as_it_reads_local_ones(
    workspace: Path, ray_backend: RayBackend
) -> None:
    batch = [
        ToolCallRequest(f"r{i}", "read_secret", {"spelling": spelling})
        for i, spelling in enumerate(["/etc/shadow", "../../etc/shadow", "/etc//shadow"])
    ]
    texts = {}
    for name, backend in (("local", LocalBackend()), ("ray", ray_backend)):
        registry = SOURCE.registry(ToolContext(workspace=workspace, session=name))
        executor = ToolExecutor(registry, ExecutionPolicy(warn_after=2), backend=backend)
        texts[name] = [o.result.text for o in await executor.run(batch)]
    assert "'/etc/shadow' has been refused 2 times" in texts["local"][1]
    assert texts["ray"] == texts["local"]


async def test_a_cancelled_run_reads_the_same_on_both_backends(
    workspace: Path, ray_backend: RayBackend
) -> None:
    from toolbridge import Outcomes

    rows = {}
    for name, backend in (("local", LocalBackend()), ("ray", ray_backend)):
        batch = [
            ToolCallRequest("quick", "add", {"a": 1, "b": 2}),
            ToolCallRequest("forever", "wait_forever", {"label": name}),
        ]
        outcomes = Outcomes()
        events: list[ToolEvent] = []
        executor = executor_for(workspace, backend, events)
        task = asyncio.create_task(executor.run(batch, into=outcomes))
        for _ in range(400):  # until the quick call is back and the long one has started
            quick_done = any(e.type == "call_finished" and e.call.id == "quick" for e in events)
            if quick_done and (workspace / f"{name}.started").exists():
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        rows[name] = [comparable(o) for o in outcomes]
    assert [row["status"] for row in rows["local"]] == ["ok", "cancelled"]
    assert rows["ray"] == rows["local"]


class _RefusesPickling:
    """Its pickling fails with an exception whose own text cannot be read."""

    def __reduce__(self) -> Any:
        class Unreadable(Exception):
            def __str__(self) -> str:
                raise RuntimeError("no text")

        raise Unreadable


@pytest.mark.parametrize("config_value", ["lock", "refuses pickling"])
async def test_a_call_that_cannot_be_sent_is_an_error_not_a_hang(
    workspace: Path, ray_backend: RayBackend, config_value: str
) -> None:
    import threading

    value = threading.Lock() if config_value == "lock" else _RefusesPickling()
    context = ToolContext(workspace=workspace, config={"value": value})
    executor = ToolExecutor(SOURCE.registry(context), backend=ray_backend)
    [outcome] = await asyncio.wait_for(
        executor.run([ToolCallRequest("x", "add", {"a": 1, "b": 2})]), 60
    )  # no time limit: before, such a call waited forever
    assert outcome.kind == "execution_error"
    assert "the request could not be sent" in outcome.result.text
