"""Runs one batch through an executor with a journal (a separate process, for the crash test).

    batch_worker.py WORKSPACE HANG_AT [approve|deny]

Calls c0..c3 of `effect` (each appends its label to effects.txt, then returns), where the
call labelled HANG_AT hangs after its effect, plus one read-only `peek` call. Prints one
line per outcome as JSON. With ``approve`` or ``deny``, it then decides on every call
reported interrupted, prints ``decided``, and runs the same batch again.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from toolbridge import (
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolOutcome,
    ToolRegistry,
    tool,
)
from toolbridge.journal import SQLiteJournal

WORKSPACE = Path(sys.argv[1])
HANG_AT = sys.argv[2]
DECIDE = sys.argv[3] if len(sys.argv) > 3 else None


@tool
async def effect(label: str) -> str:
    """A call with a side effect outside the process."""
    with (WORKSPACE / "effects.txt").open("a") as file:
        file.write(label + "\n")
    if label == HANG_AT:
        print("hanging", flush=True)
        await asyncio.sleep(3600)
    return f"did {label}"


@tool(read_only=True)
async def peek(label: str) -> str:
    """A read-only call: safe to run again after a crash."""
    with (WORKSPACE / "peeks.txt").open("a") as file:
        file.write(label + "\n")
    if label == HANG_AT:
        print("hanging", flush=True)
        await asyncio.sleep(3600)
    return f"saw {label}"


async def main() -> None:
    journal = SQLiteJournal.in_workspace(WORKSPACE)
    registry = ToolRegistry([effect, peek], context=ToolContext(workspace=WORKSPACE, session="s"))
    executor = ToolExecutor(registry, journal=journal)
    calls = [ToolCallRequest(f"c{i}", "effect", {"label": f"e{i}"}) for i in range(4)]
    calls.insert(2, ToolCallRequest("p", "peek", {"label": "p"}))
    outcomes = await executor.run(calls)
    show(outcomes)
    if DECIDE is not None:
        for outcome in outcomes:
            if outcome.approval is not None and outcome.approval.retry:
                if DECIDE == "approve":
                    executor.approve(outcome)
                else:
                    executor.deny(outcome, "the user checked: it ran")
        print("decided", flush=True)
        show(await executor.run(calls))
    await journal.close()


def show(outcomes: list[ToolOutcome]) -> None:
    for outcome in outcomes:
        meta = outcome.result.metadata.get("toolbridge.journal")
        retry = outcome.approval is not None and outcome.approval.retry
        row = [outcome.call.id, outcome.kind, outcome.result.text, meta, retry]
        print(json.dumps(row), flush=True)


asyncio.run(main())
