"""The PostgreSQL journal's starts and outcomes probe the primary key in a table that grew
after their statements were prepared, with the statistics of an empty table (a journal's
first minute): no scan of the whole table at each slot hand-over under a concurrency limit.

The server's own plans (``auto_explain``) of what the writer sends; no timing is asserted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import psycopg
import pytest
from tests.journal.pg_plans import AUTO_EXPLAIN, FILL

from toolbridge.journal import open_journal
from toolbridge.journal.postgres import PostgresJournal
from toolbridge.journal.records import CallKey, ClaimAction

PROBE = re.compile(
    r"Index Cond: \(\(session = u\.s\) AND \(call_id = u\.c\) AND \(args_hash = u\.h\)\)"
)
"""A probe of the primary key with each key of the arrays."""
SLOTS = 6


@pytest.fixture
async def journal(postgres_url: str) -> AsyncIterator[PostgresJournal]:
    """A new, empty journal whose connection hands back the plans of what it runs, and
    whose table autovacuum leaves alone (its statistics stay those of an empty table)."""
    opened = await open_journal(f"{postgres_url}&options={quote(AUTO_EXPLAIN)}")
    assert isinstance(opened, PostgresJournal)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE toolbridge_calls SET (autovacuum_enabled = false)")
    try:
        yield opened
    finally:
        await opened.close()


async def a_wave(journal: PostgresJournal, prefix: str) -> None:
    """What the calls of a slot hand-over ask of the journal: claimed queued, started,
    finished."""
    wave = [CallKey("live", f"{prefix}{n}", f"h{n}") for n in range(SLOTS)]
    claims = await asyncio.gather(*(journal.claim(key, "t", {}, queued=True) for key in wave))
    assert {claim.action for claim in claims} == {ClaimAction.RUN}
    await asyncio.gather(*(journal.start(key) for key in wave))
    await asyncio.gather(*(journal.finish(key, {"text": "ok"}) for key in wave))


async def test_starts_and_outcomes_probe_the_primary_key_after_the_table_grew(
    journal: PostgresJournal, postgres_url: str
) -> None:
    # Enough waves for psycopg to prepare each statement and the server to settle on a
    # plan for it, while the table holds a few dozen rows.
    for round_no in range(12):
        await a_wave(journal, f"early{round_no}-")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(FILL, (6_000,))
    seen: list[str] = []

    def heard(notice: psycopg.errors.Diagnostic) -> None:
        text = notice.message_primary or ""
        if "plan:" in text:
            seen.append(text)

    journal._conn.add_notice_handler(heard)
    try:
        for round_no in range(3):
            await a_wave(journal, f"late{round_no}-")
    finally:
        journal._conn.remove_notice_handler(heard)
    starts = [plan for plan in seen if "SET state = 'running'" in plan]
    outcomes = [plan for plan in seen if "SET state = 'finished'" in plan]
    assert len(starts) == 3 and len(outcomes) == 3, seen
    for plan in starts + outcomes:
        assert "Seq Scan on toolbridge_calls" not in plan, plan
        assert PROBE.search(plan), plan
