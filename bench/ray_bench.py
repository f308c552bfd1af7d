"""RayBackend against bare Ray actor calls of the same function, interleaved in one run.

    python bench/ray_bench.py [--calls 200] [--sessions 1] [--workers 2] [--rounds 15]
                              [--one-at-a-time] [--journal] [--sync]

Workload: `calls` calls of a tool that sleeps 5 ms, spread over `sessions` concurrent
sessions (each its own executor and workspace), all sharing one pool of `workers` actors.
Each round runs bare actors and RayBackend back to back (alternating which goes first),
so the machine's load drift hits both alike. Reported: the median wall time and caller
CPU time per round, the median of the per-round ratios to bare Ray, and the load average
before and after (the machine may be shared: read the ratios). `--one-at-a-time`: each
session's calls run one after another (``concurrency=False``; bare: awaited in turn).
`--journal`: a third contender, RayBackend with a SQLite call journal (`durability="process"`),
whose calls each wait for the journal to record their start before their worker starts them.
`--sync`: the tool is a sync function sleeping 5 ms in one of its worker's threads (bare:
`asyncio.to_thread` in the actor).
Every round runs in one event loop (the journal and the backend's dispatcher stay open).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_tools, importable by the workers too


ROUNDS = itertools.count()  # call ids new in every round: a journal replays a known one


def executors_for(
    backend: Any, workspaces: list[Path], concurrency: bool, journal: Any = None
) -> list[Any]:
    from toolbridge import ExecutionPolicy, ToolContext, ToolExecutor
    from toolbridge.backends.ray import ToolSource

    source = ToolSource("bench_tools:build")
    policy = ExecutionPolicy(
        persist_results=False, loop_guard=False, tracing=False, concurrency=concurrency
    )
    return [
        ToolExecutor(
            source.registry(ToolContext(workspace=folder, session=f"s{index}")),
            policy,
            backend=backend,
            journal=journal,
        )
        for index, folder in enumerate(workspaces)
    ]


async def toolbridge_round(executors: list[Any], per_session: int, name: str) -> None:
    from toolbridge import ToolCallRequest

    round_number = next(ROUNDS)
    batches = [
        [ToolCallRequest(f"r{round_number}c{i}", name, {"n": i}) for i in range(per_session)]
        for _ in executors
    ]
    results = await asyncio.gather(
        *(executor.run(batch) for executor, batch in zip(executors, batches, strict=True))
    )
    assert all(outcome.ok for outcomes in results for outcome in outcomes)


async def bare_round(
    actors: list[Any], total: int, sessions: int, in_turn: bool, method: str
) -> None:
    if not in_turn:
        answers = await asyncio.gather(
            *(getattr(actors[i % len(actors)], method).remote(i) for i in range(total))
        )
        assert answers == list(range(total))
        return

    async def session(first: int) -> None:
        for i in range(first, total, sessions):
            assert await getattr(actors[i % len(actors)], method).remote(i) == i

    await asyncio.gather(*(session(first) for first in range(sessions)))


async def timed(run: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Wall and caller CPU seconds of one round (CPU: every thread of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    await run()
    return time.perf_counter() - wall, time.process_time() - cpu


async def measure(
    contenders: dict[str, Callable[[], Awaitable[None]]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each contender per round, the order turning every round."""
    for run in contenders.values():  # warm: pools, registries, imports
        await timed(run)
        await timed(run)
    walls: dict[str, list[float]] = {name: [] for name in contenders}
    cpus: dict[str, list[float]] = {name: [] for name in contenders}
    for round_number in range(rounds):
        order = list(contenders)
        if round_number % 2:
            order.reverse()
        for name in order:
            wall, cpu = await timed(contenders[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    return walls, cpus


async def bench(args: argparse.Namespace, workspaces: list[Path], journal_path: Path) -> None:
    import ray
    from bench_tools import BareWorker

    from toolbridge.backends import LocalBackend
    from toolbridge.backends.ray import RayBackend, ToolSource
    from toolbridge.journal import SQLiteJournal

    per_session = args.calls // args.sessions
    total = per_session * args.sessions
    actors = [
        ray.remote(BareWorker).options(max_concurrency=1000, num_cpus=0).remote()
        for _ in range(args.workers)
    ]
    await asyncio.gather(*(actor.wait.remote(0) for actor in actors))
    backend = RayBackend(ToolSource("bench_tools:build"), workers=args.workers)
    concurrency = not args.one_at_a_time
    name, method = ("wait_5ms_sync", "wait_sync") if args.sync else ("wait_5ms", "wait")
    ours = executors_for(backend, workspaces, concurrency)
    local = executors_for(LocalBackend(), workspaces, concurrency)
    async with SQLiteJournal(journal_path) as journal:
        journaled = executors_for(backend, workspaces, concurrency, journal)
        contenders: dict[str, Callable[[], Awaitable[None]]] = {
            "bare Ray actors": lambda: bare_round(
                actors, total, args.sessions, not concurrency, method
            ),
            "RayBackend": lambda: toolbridge_round(ours, per_session, name),
        }
        if args.journal:
            contenders["RayBackend + SQLite journal"] = lambda: toolbridge_round(
                journaled, per_session, name
            )
        walls, cpus = await measure(contenders, args.rounds)
    local_times = [
        await timed(lambda: toolbridge_round(local, per_session, name)) for _ in range(3)
    ]
    backend.close()
    for actor in actors:
        ray.kill(actor)
    report(args, total, walls, cpus, local_times)


def report(
    args: argparse.Namespace,
    total: int,
    walls: dict[str, list[float]],
    cpus: dict[str, list[float]],
    local_times: list[tuple[float, float]],
) -> None:
    print(
        f"{total} calls of a 5 ms {'sync ' if args.sync else ''}tool "
        f"from {args.sessions} session(s)"
        f"{', one at a time' if args.one_at_a_time else ''}, {args.workers} workers, "
        f"{args.rounds} interleaved rounds; load average {args.load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} cores)"
    )
    print("| runner | wall, median s | caller CPU, median s | wall vs bare | CPU vs bare |")
    print("|---|---|---|---|---|")
    bare = "bare Ray actors"
    spreads = []
    for name, times in walls.items():
        wall, cpu = statistics.median(times), statistics.median(cpus[name])
        wall_ratios = [o / b for o, b in zip(times, walls[bare], strict=True)]
        cpu_ratios = [o / b for o, b in zip(cpus[name], cpus[bare], strict=True)]
        ratio = f"{statistics.median(wall_ratios):.2f}x"
        cpu_ratio = f"{statistics.median(cpu_ratios):.2f}x"
        print(f"| {name} | {wall:.4f} | {cpu:.4f} | {ratio} | {cpu_ratio} |")
        if name != bare:
            spreads.append(
                f"{name}: wall {min(wall_ratios):.2f}x-{max(wall_ratios):.2f}x, "
                f"CPU {min(cpu_ratios):.2f}x-{max(cpu_ratios):.2f}x"
            )
    local_wall = statistics.median(wall for wall, _ in local_times)
    local_cpu = statistics.median(cpu for _, cpu in local_times)
    print(f"| LocalBackend (this process) | {local_wall:.4f} | {local_cpu:.4f} | | |")
    print("per-round ratios to bare Ray, min-max: " + "; ".join(spreads))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--one-at-a-time", action="store_true")
    parser.add_argument("--journal", action="store_true")
    parser.add_argument("--sync", action="store_true")
    args = parser.parse_args()
    import ray

    os.environ["PYTHONPATH"] = str(HERE)
    args.load_before = os.getloadavg()
    ray.init(
        address="local",  # a runtime of its own, never another run's
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    with tempfile.TemporaryDirectory() as tmp:
        workspaces = [Path(tmp) / f"w{i}" for i in range(args.sessions)]
        for folder in workspaces:
            folder.mkdir()
        asyncio.run(bench(args, workspaces, Path(tmp) / "journal.sqlite3"))
    ray.shutdown()


if __name__ == "__main__":
    main()
