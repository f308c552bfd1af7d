"""A caller process for the crash test: runs one batch on its own local Ray, with a SQLite
journal, until it is killed. ``python seam_driver.py WORKSPACE``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def main(workspace: Path) -> None:
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
    source = ToolSource("seam_tools:build")
    # One worker with one slot: "a" holds it, "b" waits on the worker.
    backend = RayBackend(source, workers=1, max_calls_per_worker=1, grace=30)
    backend.start()
    registry = source.registry(ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    async with SQLiteJournal(workspace / "journal.sqlite3") as journal:
        executor = ToolExecutor(registry, policy, backend=backend, journal=journal)
        await executor.run(
            [
                ToolCallRequest("a", "hold", {"label": "a"}),
                ToolCallRequest("b", "mark", {"label": "b"}),
            ]
        )


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
