"""What only the SQLite journal has: a file (durable, migrated, corrupt, foreign, disk full)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from toolbridge.journal import (
    CallKey,
    CallState,
    ClaimAction,
    JournalError,
    SQLiteJournal,
    sqlite_writer,
)
from toolbridge.journal import sqlite_file as sqlite_journal
from toolbridge.journal.sqlite_file import MIGRATIONS, SCHEMA_VERSION
from toolbridge.journal.sqlite_writer import _FINISH, _START, MULTI_ROW, _rows

WORKER = Path(__file__).with_name("journal_worker.py")
KEY = CallKey("s1", "call-1", "hash-a")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite3"


async def test_an_outcome_is_durable_when_finish_returns(db: Path) -> None:
    journal = SQLiteJournal(db)
    await journal.claim(KEY, "t", {"x": 1})
    await journal.finish(KEY, {"text": "ok"})
    # Read it from another process while this journal is still open: it is on disk.
    code = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
        "print(c.execute('select state, outcome from toolbridge_calls').fetchall())"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code, str(db)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[('finished', '{\"text\":\"ok\"}')]"
    await journal.close()


def write_first_version_journal(db: Path) -> None:
    """A journal as the first schema version wrote it, with one finished call."""
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0])
    conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '1')")
    conn.execute(
        "INSERT INTO toolbridge_calls VALUES ('s1', 'call-1', 'hash-a', 't', '{}', 'finished', "
        '1, \'{"text":"from v1"}\', NULL, NULL, 1.0, 1.0, 2.0)'
    )
    conn.commit()
    conn.close()


async def test_a_first_version_journal_is_migrated(db: Path) -> None:
    write_first_version_journal(db)
    async with SQLiteJournal(db) as journal:
        claim = await journal.claim(KEY, "t", {})
        assert claim.action is ClaimAction.REPLAY
        assert claim.entry.outcome == {"text": "from v1"}
        await journal.save_run("s1", {"ok": True})  # a table version 2 added
    version = sqlite3.connect(db).execute("SELECT value FROM toolbridge_meta").fetchone()
    assert version == (str(SCHEMA_VERSION),)


async def test_a_version_2_journal_is_migrated_and_its_running_calls_are_interrupted(
    db: Path,
) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0] + MIGRATIONS[1])
    conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '2')")
    conn.execute(
        "INSERT INTO toolbridge_calls VALUES ('s1', 'call-1', 'hash-a', 't', '{}', 'running', "
        "1, NULL, NULL, NULL, 1.0, 1.0, NULL)"
    )
    conn.commit()
    conn.close()
    async with SQLiteJournal(db) as journal:
        claim = await journal.claim(KEY, "t", {})
        assert claim.action is ClaimAction.INTERRUPTED  # version 2 left it running, ownerless
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.BUSY  # ours now
    version = sqlite3.connect(db).execute("SELECT value FROM toolbridge_meta").fetchone()
    assert version == (str(SCHEMA_VERSION),) == ("4",)


def _locks_on(path: Path) -> list[str]:
    """The open-file-description locks the kernel lists on `path`."""
    inode = f":{path.stat().st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return [line for line in lines if "OFDLCK" in line and inode in line]


async def test_a_batch_of_any_size_takes_one_lock(db: Path) -> None:
    keys = [CallKey("big", f"call-{n}", "hash") for n in range(5_000)]
    async with SQLiteJournal(db) as journal:
        claims = await asyncio.gather(*(journal.claim(key, "t", {}) for key in keys))
        assert {claim.action for claim in claims} == {ClaimAction.RUN}
        assert len(_locks_on(db.with_name(db.name + "-owners"))) == 1
        await asyncio.gather(*(journal.finish(key, {"text": "ok"}) for key in keys))


def test_a_newer_journal_is_refused(db: Path) -> None:
    SQLiteJournal(db)  # creates it
    conn = sqlite3.connect(db)
    conn.execute("UPDATE toolbridge_meta SET value = '99'")
    conn.commit()
    with pytest.raises(JournalError, match=r"newer toolbridge \(schema version 99; this one"):
        SQLiteJournal(db)


class _RetryClock:
    """The journal module's `time`, telling when the opener waits to ask again."""

    def __init__(self) -> None:
        self.retrying = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        self.retrying.set()
        time.sleep(seconds)


async def test_opening_a_new_file_another_process_is_writing_waits(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite refuses at once to turn a file to WAL while another connection writes it (two
    # processes creating one journal): opening must ask again, not report it "locked 10 s".
    clock = _RetryClock()
    monkeypatch.setattr(sqlite_journal, "time", clock)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    opening = asyncio.ensure_future(asyncio.to_thread(SQLiteJournal, db))
    # it tried while the other writer held the file, was refused, and waits to ask again
    assert await asyncio.to_thread(clock.retrying.wait, 30), "the opener never retried"
    writer.execute("COMMIT")
    writer.close()
    async with await asyncio.wait_for(opening, 30) as journal:
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.RUN


def test_a_corrupt_file_is_a_clear_error(db: Path) -> None:
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(JournalError, match=r"is corrupt or not a journal .* Move it aside"):
        SQLiteJournal(db)


def test_a_foreign_sqlite_file_is_refused(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    with pytest.raises(JournalError, match="holds other tables and no toolbridge journal"):
        SQLiteJournal(db)


async def test_a_full_disk_is_a_clear_error_and_the_journal_stays_usable(small_disk: Path) -> None:
    journal = SQLiteJournal(small_disk / "journal.sqlite3")
    big = "x" * 20_000
    with pytest.raises(JournalError, match=r"is full .*the call was not recorded"):
        for index in range(100):
            key = CallKey("s", f"c{index}", "h")
            await journal.claim(key, "t", {"payload": big})
            await journal.finish(key, {"text": big})
    # What was committed before the disk filled is intact and readable.
    entries = await journal.entries()
    assert entries
    assert all(e.outcome == {"text": big} for e in entries if e.state is CallState.FINISHED)
    await journal.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [("outcome", "not json"), ("state", "bogus"), ("arguments", "{")],
)
async def test_an_unreadable_row_is_a_clear_error_and_the_journal_goes_on(
    db: Path, column: str, value: str
) -> None:
    # A row damaged on disk must not kill the journal's writer thread: that left every
    # caller (the executor's run included) waiting for an answer forever.
    async with SQLiteJournal(db) as journal:
        await journal.claim(KEY, "t", {"x": 1})
        await journal.finish(KEY, {"text": "ok"})
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE toolbridge_calls SET {column} = ?", (value,))
    conn.commit()
    conn.close()
    async with SQLiteJournal(db) as journal:
        for _ in range(2):  # the same row again: still an error, never busy
            with pytest.raises(
                JournalError,
                match=r"holds a record of call 'call-1' \(session 's1'\) it cannot read",
            ):
                await asyncio.wait_for(journal.claim(KEY, "t", {"x": 1}), 60)
        other = CallKey("s1", "call-2", "hash-b")
        claim = await asyncio.wait_for(journal.claim(other, "t", {}), 60)
        assert claim.action is ClaimAction.RUN


def test_a_claim_reads_its_rows_by_primary_key_not_by_scanning_the_table(db: Path) -> None:
    # A claim that scanned the table would slow down as the journal grows.
    asyncio.run(SQLiteJournal(db).close())  # creates the tables
    conn = sqlite3.connect(db)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    keys = [CallKey("s1", f"call-{n}", "hash") for n in range(3)]
    _rows(conn, keys)
    conn.set_trace_callback(None)
    (select,) = [text for text in statements if text.lstrip().startswith("SELECT")]
    plan = " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {select}"))
    assert "SCAN toolbridge_calls" not in plan and "SCAN c" not in plan, plan
    assert "SEARCH c USING INDEX" in plan, plan


@pytest.mark.parametrize("size", [*MULTI_ROW, 1])
def test_the_batched_updates_find_their_rows_by_primary_key(db: Path, size: int) -> None:
    # The starts and outcomes of a batch are written a chunk of rows a statement, each
    # row found by its key: a statement that scanned the table would slow down as the
    # journal grows.
    asyncio.run(SQLiteJournal(db).close())  # creates the tables
    conn = sqlite3.connect(db)
    for statements in (_START, _FINISH):
        text = statements[size]
        plan = " | ".join(
            row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {text}", [None] * text.count("?"))
        )
        assert "SCAN toolbridge_calls" not in plan, plan
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, plan


@pytest.mark.parametrize("update_from", [True, False], ids=["UPDATE FROM", "older SQLite"])
async def test_a_batch_of_any_size_is_written_whole(
    db: Path, update_from: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 64 calls in a transaction, then 39: chunks of 64 and 32 rows and 7 rows a statement,
    # each call claimed, started and finished once, and read back as written; an SQLite
    # older than 3.33 (no UPDATE FROM) updates a row a statement.
    monkeypatch.setattr(sqlite_writer, "UPDATE_FROM", update_from)
    keys = [CallKey("s1", f"call-{n}", f"hash-{n}") for n in range(103)]
    statements: list[str] = []
    async with SQLiteJournal(db) as journal:
        journal._conn.set_trace_callback(statements.append)
        claims = await asyncio.gather(
            *(journal.claim(key, "t", {"n": n}, queued=True) for n, key in enumerate(keys))
        )
        assert {claim.action for claim in claims} == {ClaimAction.RUN}
        await asyncio.gather(*(journal.start(key) for key in keys))
        await asyncio.gather(
            *(journal.finish(key, {"n": n}, error_kind="e" if n % 2 else None)
              for n, key in enumerate(keys))
        )  # fmt: skip
    updates = [text for text in statements if text.startswith("UPDATE")]
    assert len(updates) == (2 * (1 + 1 + 7) if update_from else 2 * 103), updates
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT call_id, state, outcome, error_kind, approval, started_at IS NOT NULL, owner "
        "FROM toolbridge_calls ORDER BY CAST(substr(call_id, 6) AS INTEGER)"
    ).fetchall()
    assert rows == [
        (f"call-{n}", "finished", f'{{"n":{n}}}', "e" if n % 2 else None, None, 1, None)
        for n in range(103)
    ]


async def test_closing_in_the_tick_of_a_claim_still_answers_it(db: Path) -> None:
    journal = SQLiteJournal(db)
    claim = asyncio.ensure_future(journal.claim(KEY, "t", {}))
    await asyncio.sleep(0)  # the claim is queued for the writer, not handed over yet
    await journal.close()
    assert (await asyncio.wait_for(claim, 30)).action is ClaimAction.RUN


def test_a_caller_whose_loop_closed_before_its_answer_leaves_the_journal_usable(
    db: Path,
) -> None:
    # `AgentRunner.run_sync` runs each turn in its own `asyncio.run`: a run stopped while a
    # claim was in flight closes that loop before the writer answers. The writer thread
    # died of "Event loop is closed", and every later call waited forever.
    journal = SQLiteJournal(db)
    journal._inline = False  # batches go to the writer thread (held), not run on the loop
    gate, running = threading.Event(), threading.Event()

    async def stopped_mid_claim() -> None:
        held = asyncio.ensure_future(journal._submit(lambda conn: (running.set(), gate.wait(30))))
        claim = asyncio.ensure_future(journal.claim(KEY, "t", {}))
        # both handed over in one tick: once the writer runs the first, both are in its
        # hands; then the loop ends
        assert await asyncio.to_thread(running.wait, 30), "the writer never took the job"
        assert not (held.done() or claim.done())

    asyncio.run(stopped_mid_claim())
    gate.set()

    async def next_run() -> None:
        other = CallKey("s1", "call-2", "hash-b")
        assert (await asyncio.wait_for(journal.claim(other, "t", {}), 30)).action is (
            ClaimAction.RUN
        )
        # Nobody heard the claim of the stopped run, so it never ran: it was undone.
        assert await journal.entry(KEY) is None
        await journal.close()

    asyncio.run(next_run())


async def test_a_row_whose_text_is_not_utf8_fails_its_own_claim_not_the_batch(db: Path) -> None:
    # Bytes that are not UTF-8 in one row (a damaged disk, another tool): reading it failed
    # the whole batch ("failed to record calls", the row's full text in the message, no
    # call named), so a batch holding that call could never run again.
    damaged, kept = CallKey("s1", "damaged", "h"), CallKey("s1", "kept", "h")
    async with SQLiteJournal(db) as journal:
        for key in (damaged, kept):
            await journal.claim(key, "t", {})
            await journal.finish(key, {"text": "ok " * 10_000})
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE toolbridge_calls SET outcome = CAST(x'7b2274657874223a22ff227d' AS TEXT) "
        "WHERE call_id = 'damaged'"
    )  # {"text":"\xff"}
    conn.commit()
    conn.close()
    async with SQLiteJournal(db) as journal:
        replay, refused, fresh = await asyncio.gather(
            journal.claim(kept, "t", {}),
            journal.claim(damaged, "t", {}),
            journal.claim(KEY, "t", {}),
            return_exceptions=True,
        )
        assert isinstance(refused, JournalError), refused
        assert str(refused).startswith(
            "the journal holds a record of call 'damaged' (session 's1') it cannot read"
        )
        assert len(str(refused)) < 500
        assert not isinstance(replay, BaseException) and replay.action is ClaimAction.REPLAY
        assert not isinstance(fresh, BaseException) and fresh.action is ClaimAction.RUN
        with pytest.raises(JournalError, match="record of call 'damaged'"):
            await journal.entries()
