"""A sync tool switched to run inline after it was made (`tool.inline = True`) runs on the
loop, so no thread asks for its running mark: the journal must claim its call running, as
it does for a tool made inline, never leave it queued while it runs (a crash would then
run it again as the same attempt, without asking anyone)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry
from toolbridge import tool as make_tool
from toolbridge.journal import open_journal


async def test_a_tool_switched_to_inline_is_running_in_the_journal_while_it_runs(
    workspace: Path,
) -> None:
    path = workspace / "j.sqlite3"

    @make_tool
    def effect(label: str) -> str:
        """Report this call's state in the journal, as another reader sees it meanwhile."""
        with sqlite3.connect(path) as conn:
            (state,) = conn.execute(
                "SELECT state FROM toolbridge_calls WHERE call_id = ?", (label,)
            ).fetchone()
        return str(state)

    effect.inline = True  # cheap after all: run it on the loop
    registry = ToolRegistry([effect], context=ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False)
    async with await open_journal(str(path)) as journal:
        executor = ToolExecutor(registry, policy, journal=journal)
        [outcome] = await executor.run([ToolCallRequest("c0", "effect", {"label": "c0"})])
    assert outcome.result.text == "running"
