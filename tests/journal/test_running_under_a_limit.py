"""Under `max_concurrency`, the journal says `running` of no more calls than the limit
lets run: with a limit of 6, a reader of the journal never counts 7 (found by the hostile
re-check of the independent journal checks, on PostgreSQL).

Each tool counts the journal's running rows from a connection of its own as its first
act, blocking the event loop while it reads: nothing else is written meanwhile, so the
count is what the journal said when that tool started, with no timing involved.
"""

from __future__ import annotations

from pathlib import Path

from tests.journal.reading import read_one

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import open_journal

LIMIT, CALLS = 6, 40
COUNT = "SELECT count(*) FROM toolbridge_calls WHERE state = 'running'"


def running_now(target: str) -> int:
    """The journal's running rows, read by another connection (a reader's view)."""
    return int(read_one(target, COUNT))


async def test_no_more_calls_are_running_than_the_limit_lets_run(
    journal_target: str, tmp_path: Path
) -> None:
    seen: list[int] = []

    @tool(concurrency_safe=True)
    async def count_running(n: int) -> int:
        """Count the calls the journal says are running, then answer."""
        seen.append(running_now(journal_target))  # blocks the loop: no write meanwhile
        return n

    async with await open_journal(journal_target) as journal:
        context = ToolContext(workspace=tmp_path, session="s")
        registry = ToolRegistry([count_running], context=context)
        policy = ExecutionPolicy(max_concurrency=LIMIT, persist_results=False, loop_guard=False)
        executor = ToolExecutor(registry, policy, journal=journal)
        calls = [ToolCallRequest(f"c{i}", "count_running", {"n": i}) for i in range(CALLS)]
        outcomes = await executor.run(calls)
    assert [outcome.result.text for outcome in outcomes] == [str(i) for i in range(CALLS)]
    assert len(seen) == CALLS
    assert max(seen) <= LIMIT, seen
