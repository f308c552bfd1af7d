"""RayBackend against bare Ray actor calls and the local backend, side by side in one run.

    python bench/ray_bench.py [--calls 2000] [--sessions 50] [--rounds 3]

Workload: `calls` calls of a tool that sleeps 5 ms, spread over `sessions` concurrent
sessions (each its own executor and workspace), all sharing one pool. Reported: median
wall time per round, the ratio to bare actor calls of the same function, the per-call
overhead above bare Ray in µs, and the scaling from 1 to 2 worker processes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_tools, importable by the workers too


async def toolbridge_round(backend: Any, workspaces: list[Path], per_session: int) -> float:
    from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
    from toolbridge.backends.ray import ToolSource

    source = ToolSource("bench_tools:build")
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, tracing=False)
    executors = [
        ToolExecutor(
            source.registry(ToolContext(workspace=folder, session=f"s{index}")),
            policy,
            backend=backend,
        )
        for index, folder in enumerate(workspaces)
    ]
    batches = [
        [ToolCallRequest(f"c{i}", "wait_5ms", {"n": i}) for i in range(per_session)]
        for _ in executors
    ]
    start = time.perf_counter()
    results = await asyncio.gather(
        *(executor.run(batch) for executor, batch in zip(executors, batches, strict=True))
    )
    elapsed = time.perf_counter() - start
    assert all(outcome.ok for outcomes in results for outcome in outcomes)
    return elapsed


async def bare_round(actors: list[Any], total: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(actors[i % len(actors)].wait.remote(i) for i in range(total)))
    return time.perf_counter() - start


def median_of(rounds: int, run: Any) -> float:
    return statistics.median(asyncio.run(run()) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import os

    import ray

    os.environ["PYTHONPATH"] = str(HERE)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    from bench_tools import BareWorker

    from toolbridge.backends import LocalBackend
    from toolbridge.backends.ray import RayBackend, ToolSource

    per_session = args.calls // args.sessions
    total = per_session * args.sessions
    with tempfile.TemporaryDirectory() as tmp:
        workspaces = [Path(tmp) / f"w{i}" for i in range(args.sessions)]
        for folder in workspaces:
            folder.mkdir()
        rows: list[tuple[str, float]] = []
        for workers in (1, 2):
            actors = [
                ray.remote(BareWorker).options(max_concurrency=1000, num_cpus=0).remote()
                for _ in range(workers)
            ]
            ray.get([actor.wait.remote(0) for actor in actors])
            rows.append(
                (
                    f"bare Ray actors ({workers})",
                    median_of(args.rounds, lambda a=actors: bare_round(a, total)),
                )
            )
            for actor in actors:
                ray.kill(actor)
            backend = RayBackend(ToolSource("bench_tools:build"), workers=workers)
            asyncio.run(toolbridge_round(backend, workspaces, 1))  # warm: pools and registries
            ours = median_of(
                args.rounds, lambda b=backend: toolbridge_round(b, workspaces, per_session)
            )
            rows.append((f"RayBackend ({workers})", ours))
            backend.close()
        local = median_of(
            args.rounds, lambda: toolbridge_round(LocalBackend(), workspaces, per_session)
        )
        rows.append(("LocalBackend (this process)", local))
    ray.shutdown()
    times = dict(rows)
    print(f"{total} calls of a 5 ms tool from {args.sessions} sessions, median of {args.rounds}")
    print("| runner | seconds | vs bare Ray (same workers) | overhead above bare, µs/call |")
    print("|---|---|---|---|")
    for name, seconds in rows:
        workers = "2" if "(2)" in name else "1"
        bare = times[f"bare Ray actors ({workers})"]
        ratio = seconds / bare
        overhead = (seconds - bare) / total * 1e6
        print(f"| {name} | {seconds:.3f} | {ratio:.2f}x | {overhead:+.0f} |")
    ours = times["RayBackend (1)"] / times["RayBackend (2)"]
    bare = times["bare Ray actors (1)"] / times["bare Ray actors (2)"]
    print(f"scaling 1 -> 2 workers: RayBackend {ours:.2f}x, bare {bare:.2f}x")


if __name__ == "__main__":
    main()
