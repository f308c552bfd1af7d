"""Runs one batch with max_concurrency=2 through a journal (a separate process, for the
crash test of queued calls).

    queued_worker.py WORKSPACE JOURNAL (hang|run)

Six concurrency-safe calls: e0..e2 of `effect` (not read-only: not safe to run twice)
and p0..p2 of `peek` (read-only: run again after a crash), each appending its label to
started.txt when its tool starts. With "hang" every tool hangs once started, so only
the two calls holding the slots ever start; with "run" they return at once. Prints one
JSON line per outcome: call id, error kind, journal metadata, whether a retry is asked.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from toolbridge import (
    ExecutionPolicy,
    Tool,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
)
from toolbridge.journal import open_journal

WORKSPACE = Path(sys.argv[1])
TARGET = sys.argv[2]
HANG = sys.argv[3] == "hang"


class Effect(Tool):
    """A side effect outside the process, run alongside others (not read-only)."""

    name = "effect"
    parameters = {"type": "object", "properties": {"label": {"type": "string"}}}

    @property
    def concurrency_safe(self) -> bool:
        return True

    async def execute(self, **kwargs: Any) -> str:
        label = str(kwargs["label"])
        with (WORKSPACE / "started.txt").open("a") as file:
            file.write(label + "\n")
        if HANG:
            await asyncio.sleep(3600)
        return f"did {label}"


class Peek(Effect):
    """A read-only call: safe to run again after a crash."""

    name = "peek"
    read_only = True


async def main() -> None:
    journal = await open_journal(TARGET)
    context = ToolContext(workspace=WORKSPACE, session="s")
    registry = ToolRegistry([Effect(), Peek()], context=context)
    policy = ExecutionPolicy(max_concurrency=2, persist_results=False, loop_guard=False)
    executor = ToolExecutor(registry, policy, journal=journal)
    calls = [ToolCallRequest(f"{name[0]}{i}", name, {"label": f"{name[0]}{i}"})
             for i in range(3) for name in ("effect", "peek")]  # fmt: skip
    for outcome in await executor.run(calls):
        meta = outcome.result.metadata.get("toolbridge.journal")
        retry = outcome.approval is not None and outcome.approval.retry
        print(json.dumps([outcome.call.id, outcome.kind, meta, retry]), flush=True)
    await journal.close()


asyncio.run(main())
