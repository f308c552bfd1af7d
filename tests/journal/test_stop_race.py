"""A run stopped just as the journal answers its claims (or marks a queued call running)
leaves no call owned by nobody, and no call running whose tool never started.

The answer of a claim can be set as the caller is cancelled: the caller never hears it, so
the writer lets go of it (queued again, no owner). A stop while a queued call's `running`
mark is stored (``max_concurrency``) lets go of the call too (`CallJournal.unclaim`). On
SQLite and on a real PostgreSQL server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import CallKey, CallState, ClaimAction, JournalError, open_journal

LIMIT = 30.0  # only a real hang reaches it


async def test_unclaim_queues_a_call_whose_tool_never_started(journal_target: str) -> None:
    key = CallKey("s", "c", "d" * 64)
    async with await open_journal(journal_target) as journal:
        assert (await journal.claim(key, "t", {}, queued=True)).action is ClaimAction.RUN
        await journal.start(key)
        await journal.unclaim(key)
        entry = await journal.entry(key)
        assert entry is not None and entry.state is CallState.QUEUED
        with pytest.raises(JournalError, match="not owned"):
            await journal.finish(key, {"text": "x"})  # let go of: not ours any more
        again = await journal.claim(key, "t", {})  # runs as the same, first attempt
        assert again.action is ClaimAction.RUN and again.entry.attempt == 1


@pytest.mark.parametrize("limit", [None, 2])
async def test_a_stop_at_any_point_leaves_no_call_claimed_by_nobody(
    journal_target: str, tmp_path: Path, limit: int | None
) -> None:
    """The run is cancelled after 0, 1, 2, ... turns of the event loop: whatever it had
    claimed, a call is running in the journal only if its tool started, and the same
    calls run to the end afterwards (a claim left owned would make them wait forever)."""
    started: set[str] = set()

    @tool(read_only=True, name="step")
    async def step(n: int) -> int:
        """Note the start, then take a few turns of the loop."""
        started.add(f"c{n}")
        for _ in range(3):
            await asyncio.sleep(0)
        return n

    async with await open_journal(journal_target) as journal:
        for turns in range(12):
            session = f"s{turns}-{limit}"
            registry = ToolRegistry(
                [step], context=ToolContext(workspace=tmp_path, session=session)
            )
            policy = ExecutionPolicy(max_concurrency=limit, persist_results=False)
            calls = [ToolCallRequest(f"c{i}", "step", {"n": i}) for i in range(6)]
            started.clear()
            run = asyncio.ensure_future(ToolExecutor(registry, policy, journal=journal).run(calls))
            for _ in range(turns):
                await asyncio.sleep(0)
            run.cancel()
            await asyncio.wait([run], timeout=LIMIT)
            # Claims answered as the run stopped are let go of by the writer once it sees
            # nobody heard them: one operation more lets it catch up.
            await journal.counts()
            for entry in await journal.entries(session=session):
                if entry.state in (CallState.RUNNING, CallState.INTERRUPTED):
                    assert entry.key.call_id in started, (turns, entry)
            again = ToolExecutor(registry, policy, journal=journal)
            outcomes = await asyncio.wait_for(again.run(calls), LIMIT)
            assert all(o.ok for o in outcomes), (turns, [o.result.text for o in outcomes])
