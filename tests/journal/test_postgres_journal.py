"""What only the PostgreSQL journal has: its migration, its owner lock, batches of any size."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from tests.journal.waiting import until

from toolbridge.journal import CallKey, ClaimAction, JournalError, open_journal
from toolbridge.journal.postgres_connection import MIGRATIONS, SCHEMA_VERSION


async def test_a_batch_larger_than_the_servers_lock_table_is_claimed(postgres_url: str) -> None:
    # One advisory lock per running call would need 20,000 slots of a lock table the
    # server sizes at 64 per connection: "out of shared memory". One lock per journal fits.
    keys = [CallKey("big", f"call-{n}", "hash") for n in range(20_000)]
    async with await open_journal(postgres_url) as journal:
        claims = await asyncio.gather(*(journal.claim(key, "echo", {"n": 1}) for key in keys))
        assert {claim.action for claim in claims} == {ClaimAction.RUN}
        await asyncio.gather(*(journal.finish(key, {"text": "ok"}) for key in keys))
        again = await journal.claim(keys[-1], "echo", {"n": 1})
        assert again.action is ClaimAction.REPLAY


async def test_a_version_2_journal_is_migrated_and_its_running_calls_are_interrupted(
    postgres_url: str,
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for script in MIGRATIONS[:2]:
            for statement in filter(None, (part.strip() for part in script.split(";"))):
                conn.execute(statement)  # type: ignore[call-overload]
        conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '2')")
        conn.execute(
            "INSERT INTO toolbridge_calls VALUES ('s1', 'left', 'h', 'write_file', '{}', "
            "'running', 1, NULL, NULL, NULL, 1.0, 1.0, NULL)"
        )
    async with await open_journal(postgres_url) as journal:
        claim = await journal.claim(CallKey("s1", "left", "h"), "write_file", {})
        assert claim.action is ClaimAction.INTERRUPTED  # version 2 left it running, ownerless
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT value FROM toolbridge_meta").fetchone()
    assert row == (str(SCHEMA_VERSION),)


async def test_a_call_another_open_journal_runs_is_busy_and_taken_over_once_it_closes(
    postgres_url: str,
) -> None:
    key = CallKey("s1", "c1", "h")
    first = await open_journal(postgres_url)
    async with await open_journal(postgres_url) as second:
        assert (await first.claim(key, "echo", {})).action is ClaimAction.RUN
        assert (await second.claim(key, "echo", {})).action is ClaimAction.BUSY
        await first.close()  # its owner lock goes with its connection
        taken = await second.claim(key, "echo", {})
        assert taken.action is ClaimAction.INTERRUPTED
        assert (await second.claim(key, "echo", {})).action is ClaimAction.BUSY  # it is second's
        entry = await second.restart(key)
        assert entry.attempt == 2
        await second.finish(key, {"text": "done"})
        assert (await second.claim(key, "echo", {})).action is ClaimAction.REPLAY


async def test_a_call_id_with_nul_is_refused_alone(postgres_url: str) -> None:
    # PostgreSQL's text holds no NUL (SQLite's does): that claim is refused, not its batch.
    async with await open_journal(postgres_url) as journal:
        key = CallKey("s1", "c1", "h")
        good, refused = await asyncio.gather(
            journal.claim(key, "t", {}),
            journal.claim(CallKey("s1", "nul\x00id", "h"), "t", {}),
            return_exceptions=True,
        )
        assert isinstance(refused, JournalError), refused
        assert "cannot be stored in the journal" in str(refused)
        assert not isinstance(good, BaseException) and good.action is ClaimAction.RUN
        with pytest.raises(JournalError, match="its tool name holds NUL"):
            await journal.claim(CallKey("s1", "c2", "h"), "t\x00", {})


async def test_a_connection_lost_mid_batch_answers_every_call_and_leaves_them_interrupted(
    postgres_url: str,
) -> None:
    keys = [CallKey("s1", f"c{n}", "h") for n in range(20)]
    journal = await open_journal(postgres_url)
    await asyncio.gather(*(journal.claim(key, "t", {}) for key in keys))
    pid = await backend_pid(journal)
    # The writer is in a statement when the server ends its connection; finishes queue up.
    slow = asyncio.ensure_future(journal._submit(lambda conn: conn.execute("SELECT pg_sleep(30)")))  # type: ignore[attr-defined]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # Events, not delays: the server says the writer is in pg_sleep, and the journal's
        # queue holds every finish.
        await until(lambda: is_sleeping(conn, pid), "the writer never ran pg_sleep")
        finishes = [asyncio.ensure_future(journal.finish(key, {"text": "ok"})) for key in keys]
        await until(
            lambda: len(journal._jobs) == len(keys),  # type: ignore[attr-defined]
            "the finishes never queued",
        )
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    answers = await asyncio.wait_for(asyncio.gather(slow, *finishes, return_exceptions=True), 20)
    assert all(isinstance(answer, JournalError) for answer in answers), answers
    assert "terminating connection" in str(answers[0])
    with pytest.raises(JournalError, match="the connection is closed"):
        await asyncio.wait_for(journal.claim(CallKey("s1", "late", "h"), "t", {}), 20)
    await asyncio.wait_for(journal.close(), 20)
    async with await open_journal(postgres_url) as reopened:
        claims = [await reopened.claim(key, "t", {}) for key in keys]
    assert {claim.action for claim in claims} == {ClaimAction.INTERRUPTED}


def is_sleeping(conn: psycopg.Connection[Any], pid: int) -> bool:
    """Whether the server's own view has backend `pid` running pg_sleep right now."""
    row = conn.execute(
        "SELECT state, query FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "active" and "pg_sleep" in row[1]


async def backend_pid(journal: object) -> int:
    cursor = await journal._conn.execute("SELECT pg_backend_pid()")  # type: ignore[attr-defined]
    row = await cursor.fetchone()
    return int(row[0])


async def test_a_first_version_journal_is_migrated_with_its_running_and_finished_calls(
    postgres_url: str,
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for statement in filter(None, (part.strip() for part in MIGRATIONS[0].split(";"))):
            conn.execute(statement)  # type: ignore[call-overload]
        conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '1')")
        conn.execute(
            "INSERT INTO toolbridge_calls VALUES ('s1', 'done', 'h', 't', '{}', 'finished', 1, "
            "'{\"text\": \"from v1\"}', NULL, NULL, 1.0, 1.0, 2.0), ('s1', 'left', 'h', 't', "
            "'{}', 'running', 1, NULL, NULL, NULL, 1.0, 1.0, NULL)"
        )
    async with await open_journal(postgres_url) as journal:
        done = await journal.claim(CallKey("s1", "done", "h"), "t", {})
        assert (done.action, done.entry.outcome) == (ClaimAction.REPLAY, {"text": "from v1"})
        left = await journal.claim(CallKey("s1", "left", "h"), "t", {})
        assert left.action is ClaimAction.INTERRUPTED
        await journal.save_run("s1", {"turn": 1})  # the table version 2 added
        assert await journal.load_run("s1") == {"turn": 1}
