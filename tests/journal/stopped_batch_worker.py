"""Runs a batch of calls through a SQLite journal and is stopped by a signal whose handler
exits (``SystemExit``) while the journal writes a transaction on the event loop (a
separate process, for the test of a stop that lands in a batch).

    stopped_batch_worker.py WORKSPACE JOURNAL

`CALLS` read-only calls start their tools, which wait until stopped. Then, in one turn,
`OPERATIONS` operations more than the loop writes in one transaction go to the journal:
the first raises SIGTERM, whose handler (a service's usual one) calls ``sys.exit``, so
the stop lands inside that transaction. ``asyncio.run`` then cancels the calls, which let
go of them in the journal before it ends. Exits with status 3 (the handler's) when it
ended; a hang there is what the test looks for.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
from pathlib import Path
from typing import NoReturn

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import CallKey, SQLiteJournal
from toolbridge.journal.sqlite_writer import AT_ONCE

WORKSPACE = Path(sys.argv[1])
TARGET = sys.argv[2]
CALLS = 8
OPERATIONS = AT_ONCE + 8


def stop(signum: int, frame: object) -> NoReturn:
    sys.exit(3)


async def main() -> None:
    running = 0
    everyone_runs = asyncio.Event()

    @tool(read_only=True)
    async def wait(n: int) -> int:
        """Wait until stopped."""
        nonlocal running
        running += 1
        if running == CALLS:
            everyone_runs.set()
        await asyncio.Event().wait()
        return n

    registry = ToolRegistry([wait], context=ToolContext(workspace=WORKSPACE, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    journal = SQLiteJournal(TARGET)
    executor = ToolExecutor(registry, policy, journal=journal)
    calls = [ToolCallRequest(f"c{i}", "wait", {"n": i}) for i in range(CALLS)]
    batch = asyncio.ensure_future(executor.run(calls))
    await asyncio.wait_for(everyone_runs.wait(), 60)

    def stopping(conn: sqlite3.Connection) -> None:
        signal.raise_signal(signal.SIGTERM)

    reads = [journal.entry(CallKey("other", f"r{i}", "h")) for i in range(OPERATIONS - 1)]
    await asyncio.gather(journal._submit(stopping), *reads, batch)


signal.signal(signal.SIGTERM, stop)
asyncio.run(main())
