"""Runs one batch through a journal whose calls wait to start (a separate process, for the
crash test of queued calls).

    queued_worker.py WORKSPACE JOURNAL (hang|run) (slots|thread)

Calls of `effect` (e0, e1, ...: a side effect, not safe to run twice) and of `peek` (p0,
p1, ...: read-only, run again after a crash), each appending its label to started.txt
when its work starts. They wait for one of two things:
- "slots": six async calls with max_concurrency=2 wait for a slot;
- "thread": four sync function tools on a one-thread pool wait for the thread.
With "hang" the work blocks once started, so only the calls holding the slots (or the
thread) ever start; with "run" it returns at once. Prints one JSON line per outcome: call
id, error kind, journal metadata, whether a retry is asked.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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
from toolbridge import tool as make_tool
from toolbridge.journal import open_journal

WORKSPACE = Path(sys.argv[1])
TARGET = sys.argv[2]
HANG = sys.argv[3] == "hang"
THREAD = sys.argv[4] == "thread"


def note(label: str) -> str:
    with (WORKSPACE / "started.txt").open("a") as file:
        file.write(label + "\n")
    return f"did {label}"


class Effect(Tool):
    """A side effect outside the process, run alongside others (not read-only)."""

    name = "effect"
    parameters = {"type": "object", "properties": {"label": {"type": "string"}}}

    @property
    def concurrency_safe(self) -> bool:
        return True

    async def execute(self, **kwargs: Any) -> str:
        done = note(str(kwargs["label"]))
        if HANG:
            await asyncio.sleep(3600)
        return done


class Peek(Effect):
    """A read-only call: safe to run again after a crash."""

    name = "peek"
    read_only = True


def note_in_thread(label: str) -> str:
    done = note(label)
    if HANG:
        time.sleep(3600)  # holds the only worker thread until the process is killed
    return done


@make_tool(name="effect", concurrency_safe=True)
def sync_effect(label: str) -> str:
    """A side effect outside the process (not read-only)."""
    return note_in_thread(label)


@make_tool(name="peek", concurrency_safe=True, read_only=True)
def sync_peek(label: str) -> str:
    """A read-only call: safe to run again after a crash."""
    return note_in_thread(label)


async def main() -> None:
    if THREAD:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
    journal = await open_journal(TARGET)
    context = ToolContext(workspace=WORKSPACE, session="s")
    tools = [sync_effect, sync_peek] if THREAD else [Effect(), Peek()]
    registry = ToolRegistry(tools, context=context)
    policy = ExecutionPolicy(
        max_concurrency=None if THREAD else 2, persist_results=False, loop_guard=False
    )
    executor = ToolExecutor(registry, policy, journal=journal)
    calls = [ToolCallRequest(f"{name[0]}{i}", name, {"label": f"{name[0]}{i}"})
             for i in range(2 if THREAD else 3) for name in ("effect", "peek")]  # fmt: skip
    for outcome in await executor.run(calls):
        meta = outcome.result.metadata.get("toolbridge.journal")
        retry = outcome.approval is not None and outcome.approval.retry
        print(json.dumps([outcome.call.id, outcome.kind, meta, retry]), flush=True)
    await journal.close()


asyncio.run(main())
