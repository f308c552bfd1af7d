"""How the SQLite journal's writer groups a loop's operations into transactions: a freed
slot's next start goes with the outcome that freed it, and a large batch's first tools
start before its last claims are written. Counted from the statements the journal's own
connection runs (SQLite's trace callback) and from the rows another connection sees."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import SQLiteJournal, open_journal
from toolbridge.journal.sqlite_writer import AT_ONCE


def executor(
    workspace: Path, journal: SQLiteJournal, fn: object, limit: int | None
) -> ToolExecutor:
    registry = ToolRegistry([fn], context=ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, loop_guard=False, max_concurrency=limit)
    return ToolExecutor(registry, policy, journal=journal)


async def test_a_freed_slot_starts_its_next_call_in_the_commit_of_the_outcome(
    workspace: Path,
) -> None:
    @tool(read_only=True)
    async def at_once(n: int) -> int:
        """Answer at once."""
        return n

    journal = await open_journal(str(workspace / "j.sqlite3"))
    assert isinstance(journal, SQLiteJournal)
    commits: list[str] = []
    journal._conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    async with journal:
        calls = [ToolCallRequest(f"c{i}", "at_once", {"n": i}) for i in range(20)]
        outcomes = await executor(workspace, journal, at_once, 2).run(calls)
    assert [outcome.result.text for outcome in outcomes] == [str(i) for i in range(20)]
    # The claims; the first two starts; then each pair of outcomes with the two starts
    # whose slots they freed (one commit each, not two); the last two outcomes. A commit
    # for the outcomes and another for the starts would make 21.
    assert len(commits) == 12, commits


async def test_a_large_batch_starts_its_first_tools_before_its_last_claims_are_written(
    workspace: Path,
) -> None:
    path = workspace / "j.sqlite3"
    seen: list[int] = []  # the rows committed when each tool started

    @tool(read_only=True)
    async def count_rows(n: int) -> int:
        """Count the calls the journal has committed."""
        with sqlite3.connect(path) as reader:
            seen.append(reader.execute("SELECT count(*) FROM toolbridge_calls").fetchone()[0])
        return n

    calls = [ToolCallRequest(f"c{i}", "count_rows", {"n": i}) for i in range(3 * AT_ONCE)]
    async with await open_journal(str(path)) as journal:
        assert isinstance(journal, SQLiteJournal)
        outcomes = await executor(workspace, journal, count_rows, None).run(calls)
    assert all(outcome.ok for outcome in outcomes)
    # Each transaction on the loop holds `AT_ONCE` jobs: the tools of the first ones ran
    # while the rest were still to be written.
    assert seen[0] == AT_ONCE
    assert max(seen) == 3 * AT_ONCE
