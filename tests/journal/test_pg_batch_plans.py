"""The PostgreSQL journal's keyed batch statements probe the primary key, whatever the
table's size and however stale its statistics; its listings and prunes read as before.

Plans are the server's own, of the statements the writer really sends with the values it
really binds: the journal connects with ``auto_explain`` loaded, which sends the plan of
each statement it runs back as a notice. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from urllib.parse import quote

import psycopg
import pytest
from tests.journal.pg_plans import AUTO_EXPLAIN, FILL

from toolbridge.journal import JournalError, open_journal
from toolbridge.journal.postgres import PostgresJournal
from toolbridge.journal.records import CallKey, CallState, ClaimAction

CALLS = 200
ROUNDS = 12
"""Batches of each kind: psycopg prepares a statement the sixth time it runs it, and the
server plans a prepared statement five more times for its values before it may keep a
generic plan; both kinds of plan are checked."""
SMALL = 1_000
"""Up to this many rows, a scan of the table read once is as cheap as probing it."""
PROBE = re.compile(
    r"Index Cond: \(\(session = u\.s\) AND \(call_id = u\.c\) AND \(args_hash = u\.h\)\)"
)
"""A probe of the primary key with each key of the arrays."""
LOOPED = re.compile(r"Join Filter: \(\((c\.session = u\.s|u\.s = c\.session)\b")
"""A nested loop that tests every key against each row it reads."""


@pytest.fixture(params=[12_000, 2_000, 60], ids=lambda rows: f"{rows}-rows")
def rows(request: pytest.FixtureRequest) -> int:
    """How many calls the journal's table holds before the test."""
    return int(request.param)


@pytest.fixture
async def journal(rows: int, postgres_url: str) -> AsyncIterator[PostgresJournal]:
    """A journal whose table holds `rows` finished calls, analyzed as autovacuum would have
    (so the planner knows the table's size and that its rows have no owner)."""
    opened = await open_journal(f"{postgres_url}&options={quote(AUTO_EXPLAIN)}")
    assert isinstance(opened, PostgresJournal)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(FILL, (rows,))
        conn.execute("ANALYZE toolbridge_calls")
    try:
        yield opened
    finally:
        await opened.close()


@contextmanager
def plans(journal: PostgresJournal) -> Iterator[list[str]]:
    """The plans of the statements the journal's connection runs inside the block."""
    seen: list[str] = []

    def heard(notice: psycopg.errors.Diagnostic) -> None:
        text = notice.message_primary or ""
        if "plan:" in text:
            seen.append(text)

    conn = journal._conn
    conn.add_notice_handler(heard)
    try:
        yield seen
    finally:
        conn.remove_notice_handler(heard)


def scans_of_calls(plan: str) -> list[str]:
    """Each node of `plan` that reads the calls table, with the lines under it."""
    nodes = re.split(r"\n\s*->\s*", plan)
    return [node for node in nodes if re.search(r"Scan\b.* on toolbridge_calls\b", node)]


def keyed(seen: list[str]) -> list[str]:
    """The plans of keyed statements: those that read keys from arrays."""
    return [plan for plan in seen if "unnest(" in plan and "toolbridge_calls" in plan]


def assert_probes(plans_seen: list[str], rows: int) -> None:
    """Each read of the table probes the primary key with the keys; in a small table, a
    scan read once will do, never one that tests every key against every row (a nested
    loop whose join filter is the key: milliseconds, even in a table of a few rows)."""
    for plan in plans_seen:
        assert not LOOPED.search(plan), plan
        if rows <= SMALL:
            continue
        assert "Seq Scan on toolbridge_calls" not in plan, plan
        for scan in scans_of_calls(plan):
            assert "toolbridge_calls_pkey" in scan and PROBE.search(scan), plan


def keys(prefix: str) -> list[CallKey]:
    return [CallKey("live", f"{prefix}{n}", f"h{n}") for n in range(CALLS)]


async def test_a_batch_probes_the_primary_key_for_each_keyed_statement(
    journal: PostgresJournal, rows: int, postgres_url: str
) -> None:
    with plans(journal) as seen:
        for round_no in range(ROUNDS):
            new, held = keys(f"c{round_no}-"), keys(f"d{round_no}-")
            queued = [journal.claim(key, "t", {"n": 1}, queued=True) for key in new]
            assert {claim.action for claim in await asyncio.gather(*queued)} == {ClaimAction.RUN}
            await asyncio.gather(*(journal.start(key) for key in new))
            await asyncio.gather(*(journal.finish(key, {"text": "ok"}) for key in new))
            # Claims that meet stored calls read their rows; outcomes some of which another
            # process took over first read which ones went in; calls let go of are updated
            # by key too.
            again = [journal.claim(key, "t", {"n": 1}) for key in new]
            assert {claim.action for claim in await asyncio.gather(*again)} == {ClaimAction.REPLAY}
            await asyncio.gather(*(journal.claim(key, "t", {}) for key in held))
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute(
                    "UPDATE toolbridge_calls SET owner = -1 WHERE session = 'live' "
                    "AND call_id = ANY(%s)",
                    ([key.call_id for key in held[:10]],),
                )
            outcomes = [journal.finish(key, {"text": "ok"}) for key in held[:100]]
            stored = await asyncio.gather(*outcomes, return_exceptions=True)
            assert [isinstance(done, JournalError) for done in stored] == [True] * 10 + [False] * 90
            await asyncio.gather(*(journal.abandon(key) for key in held[100:]))
    statements = keyed(seen)
    for part in (
        "INSERT INTO toolbridge_calls",  # the claims
        "SET state = 'running'",  # the starts
        "SET state = 'finished'",  # the outcomes
        "c.owner FROM unnest(",  # the rows claims met
        "c.finished_at = ",  # which outcomes went in
        "SET owner = NULL FROM",  # calls let go of
    ):
        runs = sum(part in plan for plan in statements)
        assert runs >= ROUNDS, f"{runs} plans of {part!r} seen, not {ROUNDS}: {statements}"
    assert_probes(statements, rows)


async def test_listings_counts_and_prunes_read_the_table_as_before(
    journal: PostgresJournal,
) -> None:
    with plans(journal) as seen:
        assert sum((await journal.counts()).values()) >= 60
        assert len(await journal.sessions()) >= 1
        assert await journal.prune(older_than=3600.0) >= 60
    reads = [plan for plan in seen if "toolbridge_calls" in plan]
    assert len(reads) == 3, reads
    # Each reads the whole table: a scan, as the planner chooses with its own settings
    # (the probes above are the batch statements' alone, not the connection's).
    for plan in reads:
        assert "Seq Scan on toolbridge_calls" in plan, plan


async def test_a_batch_at_that_size_stores_its_calls_and_a_failed_one_leaves_no_transaction(
    journal: PostgresJournal,
) -> None:
    first, then = keys("e"), keys("f")
    claims = await asyncio.gather(*(journal.claim(key, "t", {"n": 1}) for key in first))
    assert {claim.action for claim in claims} == {ClaimAction.RUN}
    # One batch: 200 outcomes and a claim whose key the server refuses (each part within the
    # journal's limit, together longer than a primary key entry may be, 2704 bytes). The
    # batch's statement fails; the outcomes go again on their own, the claim fails.
    too_long = CallKey(*(secrets.token_urlsafe(750) for _ in range(3)))
    answers = await asyncio.gather(
        *(journal.finish(key, {"text": key.call_id}) for key in first),
        journal.claim(too_long, "t", {}),
        return_exceptions=True,
    )
    assert isinstance(answers[-1], JournalError), answers[-1]
    assert "index row" in str(answers[-1])
    assert answers[:-1] == [None] * CALLS
    assert journal._conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # The next batches work.
    claims = await asyncio.gather(*(journal.claim(key, "t", {"n": 1}) for key in then))
    assert {claim.action for claim in claims} == {ClaimAction.RUN}
    await asyncio.gather(*(journal.finish(key, {"text": key.call_id}) for key in then))
    stored = await journal.entries(session="live")
    assert {entry.key for entry in stored} == {*first, *then}
    assert {entry.state for entry in stored} == {CallState.FINISHED}
    assert all(entry.outcome == {"text": entry.key.call_id} for entry in stored)
    assert journal._conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
