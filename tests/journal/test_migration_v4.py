"""Schema version 4 (the states queued and refused): a version 3 journal, with a call left
running by a dead process and a finished one, is migrated on open, on SQLite and on a real
PostgreSQL server; a journal of a later version is refused as newer, naming it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from toolbridge.journal import CallKey, CallState, ClaimAction, JournalError, open_journal
from toolbridge.journal import postgres_connection as pg_journal
from toolbridge.journal import sqlite_file as sqlite_journal

ROWS = (
    "INSERT INTO toolbridge_calls VALUES ('s1', 'left', 'h', 'write_file', '{}', 'running', "
    "1, NULL, NULL, NULL, 1.0, 1.0, NULL, 12345)",
    "INSERT INTO toolbridge_calls VALUES ('s1', 'done', 'h', 'read_file', '{}', 'finished', "
    '1, \'{"text": "from v3"}\', NULL, NULL, 2.0, 2.0, 3.0, NULL)',
)


def version_3(target: str) -> None:
    """Write a journal as version 3 did (its three migrations, no table of version 4)."""
    if target.startswith("postgresql://"):
        with psycopg.connect(target, autocommit=True) as conn:
            for script in pg_journal.MIGRATIONS[:3]:
                for statement in filter(None, (part.strip() for part in script.split(";"))):
                    conn.execute(statement)  # type: ignore[call-overload]
            conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '3')")
            for row in ROWS:
                conn.execute(row)  # type: ignore[call-overload]
        return
    conn = sqlite3.connect(target)
    conn.executescript("".join(sqlite_journal.MIGRATIONS[:3]))
    conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '3')")
    for row in ROWS:
        conn.execute(row)
    conn.commit()
    conn.close()


def stored_version(target: str) -> str:
    if target.startswith("postgresql://"):
        with psycopg.connect(target) as conn:
            row = conn.execute("SELECT value FROM toolbridge_meta").fetchone()
    else:
        with sqlite3.connect(target) as conn:
            row = conn.execute("SELECT value FROM toolbridge_meta").fetchone()
        conn.close()
    assert row is not None
    return str(row[0])


async def test_a_version_3_journal_is_migrated_to_4(journal_target: str) -> None:
    version_3(journal_target)
    async with await open_journal(journal_target) as journal:
        listed = {e.key.call_id: e.state for e in await journal.entries(session="s1")}
        # Its owner (12345) holds no lock: a reader proves it interrupted, at once.
        assert listed == {"left": CallState.INTERRUPTED, "done": CallState.FINISHED}
        replay = await journal.claim(CallKey("s1", "done", "h"), "read_file", {})
        assert replay.action is ClaimAction.REPLAY and replay.entry.outcome == {"text": "from v3"}
        claim = await journal.claim(CallKey("s1", "left", "h"), "write_file", {})
        assert claim.action is ClaimAction.INTERRUPTED
        queued = await journal.claim(CallKey("s1", "new", "h"), "t", {}, queued=True)
        assert (queued.action, queued.entry.state) == (ClaimAction.RUN, CallState.QUEUED)
    assert stored_version(journal_target) == "4" == str(sqlite_journal.SCHEMA_VERSION)
    assert pg_journal.SCHEMA_VERSION == 4


async def test_a_newer_journal_is_refused_by_name(journal_target: str) -> None:
    async with await open_journal(journal_target):
        pass
    if journal_target.startswith("postgresql://"):
        with psycopg.connect(journal_target, autocommit=True) as conn:
            conn.execute("UPDATE toolbridge_meta SET value = '5'")
    else:
        with sqlite3.connect(journal_target) as conn:
            conn.execute("UPDATE toolbridge_meta SET value = '5'")
        conn.close()
    with pytest.raises(JournalError, match=r"newer toolbridge \(schema version 5; this one") as e:
        await open_journal(journal_target)
    assert ("dbname=" if "://" in journal_target else Path(journal_target).name) in str(e.value)
