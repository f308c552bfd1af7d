"""Closing a PostgreSQL journal whose server does not answer (the backend process of its
connection stopped with SIGSTOP: a real server, hung) ends within the journal's
`close_limit`: what still waited for the server fails with a `JournalError` that says so,
the error is logged, and once the server goes on it finds the connection gone and drops
the journal's calls.

No timing is asserted: the close must end at all (a generous bound against a hang)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import psycopg
import pytest

from toolbridge.journal import JournalError, open_journal
from toolbridge.journal.postgres import PostgresJournal
from toolbridge.journal.records import CallKey, CallState, ClaimAction


async def test_closing_while_the_server_does_not_answer_hangs_up_within_the_limit(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    journal = await open_journal(postgres_url)
    assert isinstance(journal, PostgresJournal)
    sent, held = CallKey("hung", "sent", "h"), CallKey("hung", "held", "h")
    for key in (sent, held):
        assert (await journal.claim(key, "t", {})).action is ClaimAction.RUN
    backend = journal._conn.info.backend_pid
    journal.close_limit = 0.5
    os.kill(backend, signal.SIGSTOP)
    try:
        stored = journal.finish_soon(sent, {"text": "ok"})  # sent, never answered
        with caplog.at_level(logging.ERROR, "toolbridge.journal"):
            await asyncio.wait_for(journal.close(), 60)  # a bound against a hang only
    finally:
        os.kill(backend, signal.SIGCONT)
    with pytest.raises(JournalError, match=r"did not answer within 0\.5 s while closing"):
        await stored
    assert any("did not answer within" in record.getMessage() for record in caplog.records)
    # The server goes on, finds the connection gone and ends its backend: the call held
    # is interrupted; the outcome sent may have been stored first (never left running).
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        end = asyncio.get_running_loop().time() + 30
        while await (
            await conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,))
        ).fetchone():
            assert asyncio.get_running_loop().time() < end, "the stopped backend never ended"
            await asyncio.sleep(0.02)
    async with await open_journal(postgres_url) as reader:
        states = {key.call_id: (await reader.entry(key)) for key in (sent, held)}
    assert {name: entry and entry.state for name, entry in states.items()} in (
        {"sent": CallState.FINISHED, "held": CallState.INTERRUPTED},
        {"sent": CallState.INTERRUPTED, "held": CallState.INTERRUPTED},
    )
