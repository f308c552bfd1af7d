"""The PostgreSQL pg_journal under a concurrency limit: a slot's next call waits for its start
mark, and the start goes in one statement with the outcomes submitted before it (the call
that freed the slot), so a reader never counts more calls running than the limit lets run
(tests/pg_journal/test_running_under_a_limit.py). Even when another transaction holds the
outcome's row (a real row lock here), the start is not answered before that outcome is
stored.

No timing is asserted: the start must not come back while the outcome's row stays locked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from toolbridge.journal.postgres import PostgresJournal
from toolbridge.journal.records import CallKey, CallState, ClaimAction


async def test_a_start_waits_for_the_outcome_submitted_before_it(
    pg_journal: PostgresJournal, postgres_url: str
) -> None:
    done, waiting = CallKey("live", "done", "h"), CallKey("live", "next", "h")
    assert (await pg_journal.claim(done, "t", {})).action is ClaimAction.RUN
    assert (await pg_journal.claim(waiting, "t", {}, queued=True)).action is ClaimAction.RUN
    row = await (await pg_journal._conn.execute("SELECT pg_backend_pid()")).fetchone()
    assert row is not None
    backend = row[0]
    watcher = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    async with watcher, await psycopg.AsyncConnection.connect(postgres_url) as other:
        # Another transaction holds the finished call's row: its outcome cannot be stored
        # until that transaction ends.
        await other.execute("SELECT 1 FROM toolbridge_calls WHERE call_id = 'done' FOR UPDATE")
        # One slot's hand-over, in one turn of the loop (one writer batch): a call's
        # outcome, then the next call's start.
        stored = pg_journal.finish_soon(done, {"text": "ok"})
        started = asyncio.ensure_future(pg_journal.start(waiting))
        # The outcome and the start were sent together, and wait for the lock (seen from a
        # connection of its own: within the other's transaction the server's activity view
        # would not change).
        end = asyncio.get_running_loop().time() + 30
        while True:
            cursor = await watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (backend,)
            )
            state = await cursor.fetchone()
            if state is not None and state[0] == "Lock":
                break
            assert asyncio.get_running_loop().time() < end, "the outcome was never sent"
            await asyncio.sleep(0.02)
        assert not stored.done() and not started.done()
        await other.rollback()
        await stored
        assert await started is None
    entries = {entry.key: entry for entry in await pg_journal.entries(session="live")}
    assert entries[waiting].state is CallState.RUNNING
    assert entries[waiting].started_at is not None
    assert entries[done].state is CallState.FINISHED
    assert entries[done].outcome == {"text": "ok"}


async def test_a_start_and_the_outcome_before_it_are_one_statement(
    pg_journal: PostgresJournal,
) -> None:
    done, waiting = CallKey("live", "done", "h"), CallKey("live", "next", "h")
    assert (await pg_journal.claim(done, "t", {})).action is ClaimAction.RUN
    assert (await pg_journal.claim(waiting, "t", {}, queued=True)).action is ClaimAction.RUN
    conn = pg_journal._conn
    sent: list[str] = []
    execute = conn.execute

    async def counted(query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append(str(query))
        return await execute(query, params, **kwargs)

    conn.execute = counted  # type: ignore[method-assign]

    async def start() -> list[str]:
        await pg_journal.start(waiting)
        return list(sent)  # what was sent when this call's tool would start

    try:
        stored = pg_journal.finish_soon(done, {"text": "ok"})
        seen = await asyncio.ensure_future(start())
        await stored
    finally:
        del conn.execute
    assert len(seen) == 1, seen
    assert "SET state = 'running'" in seen[0] and "SET state = 'finished'" in seen[0], seen
    assert sent == seen
