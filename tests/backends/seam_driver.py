"""A caller process for the crash tests: runs one batch on its own local Ray, with a SQLite
journal, until it is killed. ``python seam_driver.py WORKSPACE [threads]``: by default
"a" holds the only slot of one worker and "b" waits for it; with ``threads``, three
sync calls go to one worker with one thread: one holds it, the others wait for it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def main(workspace: Path, threads: bool) -> None:
    import ray

    from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
    from toolbridge.backends.ray import RayBackend, ToolSource
    from toolbridge.journal import SQLiteJournal

    ray.init(
        address="local",
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    if threads:
        source = ToolSource("seam_tools:build_one_thread")
        backend = RayBackend(source, workers=1, grace=30)
        batch = [ToolCallRequest(f"c{n}", "hold_sync", {"label": f"c{n}"}) for n in range(3)]
    else:  # One worker with one slot: "a" holds it, "b" waits on the worker.
        source = ToolSource("seam_tools:build")
        backend = RayBackend(source, workers=1, max_calls_per_worker=1, grace=30)
        batch = [
            ToolCallRequest("a", "hold", {"label": "a"}),
            ToolCallRequest("b", "mark", {"label": "b"}),
        ]
    backend.start()
    registry = source.registry(ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        executor = ToolExecutor(registry, policy, backend=backend, journal=journal)
        await executor.run(batch)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2:] == ["threads"]))
