"""Runs one batch of sync function tools on a one-thread pool through a journal (a
separate process, for the crash test of calls waiting for a worker thread).

    thread_worker.py WORKSPACE JOURNAL (hang|run)

Four calls: e0, e1 of `effect` (not read-only: not safe to run twice) and p0, p1 of
`peek` (read-only), each appending its label to started.txt when its function starts.
With "hang" a function blocks its thread once started, so only the call the one thread
took ever starts; with "run" they return at once. Prints one JSON line per outcome: call
id, error kind, journal metadata, whether a retry is asked.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry
from toolbridge import tool as make_tool
from toolbridge.journal import open_journal

WORKSPACE = Path(sys.argv[1])
TARGET = sys.argv[2]
HANG = sys.argv[3] == "hang"


def note(label: str) -> str:
    with (WORKSPACE / "started.txt").open("a") as file:
        file.write(label + "\n")
    if HANG:
        time.sleep(3600)  # holds the only worker thread until the process is killed
    return f"did {label}"


@make_tool(concurrency_safe=True)
def effect(label: str) -> str:
    """A side effect outside the process (not read-only)."""
    return note(label)


@make_tool(concurrency_safe=True, read_only=True)
def peek(label: str) -> str:
    """A read-only call: safe to run again after a crash."""
    return note(label)


async def main() -> None:
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
    journal = await open_journal(TARGET)
    context = ToolContext(workspace=WORKSPACE, session="s")
    registry = ToolRegistry([effect, peek], context=context)
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    executor = ToolExecutor(registry, policy, journal=journal)
    calls = [ToolCallRequest(f"{name[0]}{i}", name, {"label": f"{name[0]}{i}"})
             for i in range(2) for name in ("effect", "peek")]  # fmt: skip
    for outcome in await executor.run(calls):
        meta = outcome.result.metadata.get("toolbridge.journal")
        retry = outcome.approval is not None and outcome.approval.retry
        print(json.dumps([outcome.call.id, outcome.kind, meta, retry]), flush=True)
    await journal.close()


asyncio.run(main())
