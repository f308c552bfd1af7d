"""Hostile re-checks of the journal's promises (issue 20, item 4), on SQLite and a real
PostgreSQL server: a damaged version row, and the CLI reading a journal after a crash."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.journal.reading import read_one

from toolbridge.journal import CallKey, CallState, JournalError, open_journal
from toolbridge.journal import postgres_connection as pg_journal
from toolbridge.journal import sqlite_file as sqlite_journal

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
        with pytest.raises(JournalError, match="damaged: it has no schema version") as raised:
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
    assert "damaged: it has no schema version" in done.stderr


async def test_reading_a_version_3_journal_leaves_it_version_3(journal_target: str) -> None:
    # `journal list` (create=False) migrated it to 4, a write by a read command: a version
    # 3 process still using the journal then refused it as written by a newer toolbridge.
    version_3(journal_target)
    async with await open_journal(journal_target, create=False) as journal:
        listed = {e.key.call_id: e.state for e in await journal.entries(session="s1")}
        assert listed == {"left": CallState.INTERRUPTED, "done": CallState.FINISHED}
        assert await journal.counts() == {"s1": 2}
    assert stored_version(journal_target) == "3"
    async with await open_journal(journal_target) as journal:  # a run migrates it
        assert len(await journal.entries()) == 2
    assert stored_version(journal_target) == "4"


async def test_reading_a_journal_too_old_to_read_unmigrated_says_so_and_changes_nothing(
    journal_target: str,
) -> None:
    await make_journal(journal_target)
    set_version(journal_target, "2")  # version 2 had no owner column: not readable as is
    with pytest.raises(JournalError, match="version 2") as raised:
        await open_journal(journal_target, create=False)
    assert "does not migrate" in str(raised.value)
    assert stored_version(journal_target) == "2"


def set_version(target: str, value: str) -> None:
    sql = f"UPDATE toolbridge_meta SET value = '{value}' WHERE key = 'schema_version'"
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(sql.encode())
        return
    with sqlite3.connect(target) as conn:
        conn.execute(sql)
    conn.close()


def version_3(target: str) -> None:
    """A journal as version 3 wrote it (its three migrations), a call left running by a
    dead owner and a finished one."""
    rows = (
        "INSERT INTO toolbridge_calls VALUES ('s1', 'left', 'h', 'w', '{}', 'running', 1, "
        "NULL, NULL, NULL, 1.0, 1.0, NULL, 12345)",
        "INSERT INTO toolbridge_calls VALUES ('s1', 'done', 'h', 'r', '{}', 'finished', 1, "
        "'{}', NULL, NULL, 2.0, 2.0, 3.0, NULL)",
    )
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            for script in pg_journal.MIGRATIONS[:3]:
                for statement in filter(None, (part.strip() for part in script.split(";"))):
                    conn.execute(statement.encode())
            conn.execute(b"INSERT INTO toolbridge_meta VALUES ('schema_version', '3')")
            for row in rows:
                conn.execute(row.encode())
        return
    conn = sqlite3.connect(target)
    conn.executescript("".join(sqlite_journal.MIGRATIONS[:3]))
    conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '3')")
    for row in rows:
        conn.execute(row)
    conn.commit()
    conn.close()


def stored_version(target: str) -> str:
    return str(read_one(target, "SELECT value FROM toolbridge_meta WHERE key = 'schema_version'"))


async def test_a_journal_over_tcp_asks_the_server_to_notice_a_lost_host_in_seconds(
    postgres_over_tcp: str,
) -> None:
    """A host that dies closes no socket: the server lets go of its owner lock (so its
    running calls show interrupted) only when keepalives find it gone, after two hours
    by the system's defaults. The journal's connection asks for about 25 s."""
    from toolbridge.journal.postgres import PostgresJournal

    journal = await PostgresJournal.connect(f"{postgres_over_tcp} dbname=postgres")
    try:
        cursor = await journal._conn.execute(
            "SELECT current_setting('tcp_keepalives_idle'), "
            "current_setting('tcp_keepalives_interval'), "
            "current_setting('tcp_keepalives_count'), inet_client_addr()::text"
        )
        row = await cursor.fetchone()
    finally:
        await journal.close()
    assert row is not None and row[3].startswith("127.0.0.1")
    idle, interval, count = (int(value.rstrip("s")) for value in row[:3])
    assert idle + interval * count <= 30


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs, made read-only by the test with `remount`."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, f"mounting a tmpfs needs root: {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_the_read_commands_read_a_journal_on_a_read_only_disk(read_only_mount: Path) -> None:
    """An audit of a journal on a read-only disk (a mounted backup): list, show and export
    read it, changing nothing; prune says the disk is read-only."""
    import asyncio

    from toolbridge.journal import SQLiteJournal

    async def write() -> None:
        async with SQLiteJournal.in_workspace(read_only_mount) as journal:
            await journal.claim(KEY, "t", {"n": 1})
            await journal.finish(KEY, {"text": "ok"})
            await journal.claim(CallKey("s", "left", "h"), "t", {})  # left running

    asyncio.run(write())
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "toolbridge", "journal", *args, "--workspace",
             str(read_only_mount)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    listed = cli("list")
    assert listed.returncode == 0, listed.stderr
    assert "s" in listed.stdout
    exported = cli("export")
    assert exported.returncode == 0, exported.stderr
    import json

    states = {row["call_id"]: row["state"] for row in map(json.loads, exported.stdout.splitlines())}
    assert states == {"c": "finished", "left": "interrupted"}
    pruned = cli("prune", "--keep-sessions", "0")
    assert pruned.returncode == 3 and "read-only" in pruned.stderr, pruned.stderr
