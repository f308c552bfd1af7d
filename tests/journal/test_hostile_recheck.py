"""Hostile re-checks of the journal's promises (issue 20, item 4), on SQLite and a real
PostgreSQL server: a damaged version row, and the CLI reading a journal after a crash."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge.journal import CallKey, JournalError, open_journal

KEY = CallKey("s", "c", "h")


async def make_journal(target: str) -> None:
    async with await open_journal(target) as journal:
        await journal.claim(KEY, "t", {})
        await journal.finish(KEY, {"text": "ok"})


def delete_version_row(target: str) -> None:
    sql = "DELETE FROM toolbridge_meta WHERE key = 'schema_version'"
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(sql)
        return
    with sqlite3.connect(target) as conn:
        conn.execute(sql)
    conn.close()


async def test_a_missing_schema_version_row_is_a_damaged_journal_not_a_migration(
    journal_target: str,
) -> None:
    # It was read as version 1, and migrating it failed with "table toolbridge_runs
    # already exists" (telling nothing of what to do).
    await make_journal(journal_target)
    delete_version_row(journal_target)
    for create in (True, False):
        with pytest.raises(JournalError, match="damaged: has no schema version") as raised:
            await open_journal(journal_target, create=create)
        assert "already exists" not in str(raised.value)
        assert "move it aside" in str(raised.value)


def test_the_cli_says_a_journal_without_its_version_row_is_damaged(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "j.sqlite3"
    asyncio.run(make_journal(str(path)))
    delete_version_row(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", "list", "--journal", str(path)],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "damaged: has no schema version" in done.stderr
