"""The executor's behaviour on both backends (the same tests), and what only Ray adds."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
from toolbridge.backends import ExecutionBackend, LocalBackend
from toolbridge.backends.ray import RayBackend, ToolSource

SOURCE = ToolSource("ray_tools:build")


WAIT = 30.0  # seconds before an awaited effect counts as never coming (a hang guard)


@pytest.fixture(scope="module")
def ray_backend(ray_runtime: None) -> Iterator[RayBackend]:
    # A cancelled async call gets a generous grace to stop before its worker is killed: no
    # test here means to trip it (blocking calls are killed at once, whatever the grace).
    backend = RayBackend(SOURCE, workers=2, grace=WAIT)
    backend.start()  # up before the tests: a call's time limit counts the wait for a worker
    yield backend
    backend.close()


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> ExecutionBackend:
    if request.param == "local":
        return LocalBackend()
    return request.getfixturevalue("ray_backend")  # type: ignore[no-any-return]


def executor_for(workspace: Path, backend: ExecutionBackend, session: str = "s") -> ToolExecutor:
    registry = SOURCE.registry(ToolContext(workspace=workspace, session=session))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    return ToolExecutor(registry, policy, backend=backend)


def _text(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


async def appears(path: Path) -> str:
    """The text of `path` once it exists (written by a worker: some moment later)."""
    end = asyncio.get_running_loop().time() + WAIT
    while (text := _text(path)) is None:
        assert asyncio.get_running_loop().time() < end, f"{path.name} never appeared"
        await asyncio.sleep(0.05)
    return text


def calls(*specs: tuple[str, dict[str, Any]]) -> list[ToolCallRequest]:
    return [ToolCallRequest(f"c{i}", name, args) for i, (name, args) in enumerate(specs)]


async def test_outcomes_in_call_order_with_their_kinds(
    workspace: Path, backend: ExecutionBackend
) -> None:
    outcomes = await executor_for(workspace, backend).run(
        calls(
            ("write_step", {"label": "a"}),
            ("boom", {"message": "it broke"}),
            ("nope", {}),
            ("write_step", {"label": ["not", "text"]}),
            ("nap", {"seconds": "0.01", "label": "n"}),
        )
    )
    assert [o.call.id for o in outcomes] == ["c0", "c1", "c2", "c3", "c4"]
    assert [o.kind for o in outcomes] == [
        None,
        "execution_error",
        "unknown_tool",
        "invalid_arguments",
        None,
    ]
    assert outcomes[0].result.text == "a written"
    assert "it broke" in outcomes[1].result.text
    assert outcomes[4].result.text == "n slept"  # "0.01" was cast on the caller's side


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


async def test_safe_calls_run_together_others_alone_in_order(
    workspace: Path, backend: ExecutionBackend
) -> None:
    from ray_tools import spans

    outcomes = await executor_for(workspace, backend).run(
        calls(
            ("meet", {"party": 3, "label": "r1"}),  # each ends only once all three started
            ("meet", {"party": 3, "label": "r2"}),
            ("meet", {"party": 3, "label": "r3"}),
            ("write_step", {"label": "w1"}),
            ("write_step", {"label": "w2"}),
        )
    )
    assert all(o.ok for o in outcomes), [o.result.text for o in outcomes]
    found = spans(workspace)
    assert overlaps(found["r1"], found["r2"]) and overlaps(found["r2"], found["r3"])
    assert max(found[r][1] for r in ("r1", "r2", "r3")) <= found["w1"][0]  # writes wait
    assert found["w1"][1] <= found["w2"][0]  # and run one after the other


async def test_a_timeout_stops_an_async_call(workspace: Path, backend: ExecutionBackend) -> None:
    registry = SOURCE.registry(ToolContext(workspace=workspace))
    # The limit this test trips must first let the call start, or nothing is there to
    # cancel: on a cluster it covers the dispatch to a worker (generous, as under load);
    # in process the tool starts before the limit can fire.
    limit = 10.0 if isinstance(backend, RayBackend) else 0.3
    policy = ExecutionPolicy(persist_results=False, default_timeout=limit)
    executor = ToolExecutor(registry, policy, backend=backend)
    [outcome] = await executor.run(calls(("nap", {"seconds": 300, "label": "slow"})))
    assert outcome.kind == "timeout"
    # the cancellation reaches the tool (on a worker: a moment later)
    assert (await appears(workspace / "cancelled.txt")).split() == ["slow"]


async def test_cancelling_the_run_stops_the_calls(
    workspace: Path, backend: ExecutionBackend
) -> None:
    executor = executor_for(workspace, backend)
    task = asyncio.create_task(executor.run(calls(("nap", {"seconds": 300, "label": "c"}))))
    await appears(workspace / "spans.txt")  # the call started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await appears(workspace / "cancelled.txt")).split() == ["c"]


async def test_approval_then_the_approved_call_runs_once(
    workspace: Path, backend: ExecutionBackend
) -> None:
    executor = executor_for(workspace, backend)
    batch = calls(("deploy", {"target": "web"}))
    [pending] = await executor.run(batch)
    assert pending.status == "pending_approval"
    assert not (workspace / "deployed.txt").exists()  # nothing ran on the backend
    executor.approve(pending)
    [done] = await executor.run(batch)
    assert done.ok and done.result.text == "deployed web"
    assert (workspace / "deployed.txt").read_text().split() == ["web"]


async def test_a_long_result_is_capped_and_paged_on_the_callers_side(
    workspace: Path, backend: ExecutionBackend
) -> None:
    registry = SOURCE.registry(ToolContext(workspace=workspace))
    policy = ExecutionPolicy(max_result_chars=1_000, preview_chars=100, loop_guard=False)
    executor = ToolExecutor(registry, policy, backend=backend)
    [outcome] = await executor.run(calls(("long_text", {"chars": 50_000})))
    assert outcome.ok and len(outcome.result.text) < 2_000
    assert "read_tool_result" in outcome.result.text
    [page] = await executor.run([ToolCallRequest("p", "read_tool_result", {"call_id": "c0"})])
    assert page.ok and page.result.text.count("x") >= 10_000  # the pager runs here


async def test_the_first_failure_stops_the_run(workspace: Path, backend: ExecutionBackend) -> None:
    registry = SOURCE.registry(ToolContext(workspace=workspace))
    policy = ExecutionPolicy(persist_results=False, fail_on_tool_error=True)
    executor = ToolExecutor(registry, policy, backend=backend)
    outcomes = await executor.run(
        calls(("boom", {"message": "first"}), ("write_step", {"label": "never"}))
    )
    assert outcomes.fatal is outcomes[0] and outcomes[0].kind == "execution_error"
    assert outcomes[1].status == "skipped"
    assert not (workspace / "spans.txt").exists()


async def test_one_at_a_time_when_the_policy_says_so(
    workspace: Path, backend: ExecutionBackend
) -> None:
    from ray_tools import spans

    registry = SOURCE.registry(ToolContext(workspace=workspace))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, max_concurrency=1)
    executor = ToolExecutor(registry, policy, backend=backend)
    outcomes = await executor.run(
        calls(*(("nap", {"seconds": 0.1, "label": f"n{i}"}) for i in range(3)))
    )
    assert all(o.ok for o in outcomes), [o.result.text for o in outcomes]
    found = sorted(spans(workspace).values())
    assert len(found) == 3 and all(a[1] <= b[0] for a, b in itertools.pairwise(found))


# --- what only a cluster brings ----------------------------------------------------------


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_blocking_call_past_its_limit_is_stopped_for_real(
    workspace: Path, ray_backend: RayBackend
) -> None:
    executor = executor_for(workspace, ray_backend)
    [outcome] = await executor.run(calls(("block", {"seconds": 60})))
    assert outcome.kind == "timeout"
    blocked_pid = int((workspace / "pids.txt").read_text().split()[0])
    end = asyncio.get_running_loop().time() + WAIT
    while process_alive(blocked_pid):  # the blocked worker process is killed, then replaced
        assert asyncio.get_running_loop().time() < end, f"worker {blocked_pid} still alive"
        await asyncio.sleep(0.05)
    [after] = await executor.run(calls(("pid", {})))
    assert after.ok and after.value != blocked_pid


async def test_a_dead_worker_is_an_outcome_side_effects_are_not_retried(
    workspace: Path, ray_backend: RayBackend
) -> None:
    executor = executor_for(workspace, ray_backend)
    [outcome] = await executor.run(calls(("die_once", {"marker": "m"})))
    assert outcome.kind == "worker_lost", outcome.result.text
    assert "not retried" in outcome.result.text
    assert (workspace / "effects.txt").read_text().split() == ["m"]  # ran once, not again
    [after] = await executor.run(calls(("pid", {})))
    assert after.ok  # the pool recovered without help


async def test_a_read_only_call_is_retried_on_a_fresh_worker(
    workspace: Path, ray_backend: RayBackend
) -> None:
    [outcome] = await executor_for(workspace, ray_backend).run(
        calls(("die_first_time", {"marker": "r"}))
    )
    assert outcome.ok, outcome.result.text
    assert outcome.result.text == "answered on retry"


async def test_a_tool_that_needs_a_resource_runs_where_it_is(
    workspace: Path, ray_backend: RayBackend
) -> None:
    import ray

    outcomes = await executor_for(workspace, ray_backend).run(
        calls(("sandboxed", {}), ("sandboxed", {}))
    )
    assert all(o.ok for o in outcomes), [o.result.text for o in outcomes]
    assert ray.available_resources().get("sandbox", 0) == 0  # its worker holds the sandbox
    pids = {o.result.text for o in outcomes}
    assert len(pids) == 1  # one sandbox, one worker: both calls ran there


async def test_fifty_sessions_share_one_pool(tmp_path: Path, ray_backend: RayBackend) -> None:
    workspaces = [tmp_path / f"w{index}" for index in range(50)]
    for folder in workspaces:
        folder.mkdir()
    executors = [
        executor_for(folder, ray_backend, session=f"session-{index}")
        for index, folder in enumerate(workspaces)
    ]
    results = await asyncio.gather(
        *(executor.run(calls(("where", {}), ("nap", {"seconds": 0.01, "label": "x"})))
          for executor in executors)
    )  # fmt: skip
    for index, (folder, outcomes) in enumerate(zip(workspaces, results, strict=True)):
        assert [o.ok for o in outcomes] == [True, True]
        assert outcomes[0].result.text == str(folder)
        assert (folder / "touched").read_text() == f"session-{index}"


async def test_with_a_journal_a_call_runs_once_on_the_cluster(
    workspace: Path, ray_backend: RayBackend
) -> None:
    from toolbridge.journal import SQLiteJournal

    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        batch = calls(("write_step", {"label": "once"}))
        for _ in range(2):  # a retry after a restart, say: same session, id and arguments
            registry = SOURCE.registry(ToolContext(workspace=workspace, session="s"))
            executor = ToolExecutor(registry, backend=ray_backend, journal=journal)
            [outcome] = await executor.run(batch)
            assert outcome.ok and outcome.result.text == "once written"
    starts = [
        line for line in (workspace / "spans.txt").read_text().splitlines() if "start" in line
    ]
    assert len(starts) == 1  # recorded by the caller, run once by a worker
