"""The SQLite journal with real files, real processes, a real crash and a really full disk."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolbridge.journal import (
    SCHEMA_VERSION,
    CallKey,
    CallState,
    ClaimAction,
    JournalError,
    SQLiteJournal,
)
from toolbridge.journal.sqlite import MIGRATIONS

WORKER = Path(__file__).with_name("journal_worker.py")
KEY = CallKey("s1", "call-1", "hash-a")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "journal.sqlite3"


async def test_run_then_replay_never_twice(db: Path) -> None:
    async with SQLiteJournal(db) as journal:
        claim = await journal.claim(KEY, "write_file", {"path": "a"})
        assert claim.action is ClaimAction.RUN
        assert (claim.entry.state, claim.entry.attempt) == (CallState.RUNNING, 1)
        await journal.finish(KEY, {"text": "wrote a"}, error_kind=None)
        again = await journal.claim(KEY, "write_file", {"path": "a"})
        assert again.action is ClaimAction.REPLAY
        assert again.entry.outcome == {"text": "wrote a"}
        other_args = await journal.claim(CallKey("s1", "call-1", "hash-b"), "write_file", {})
        assert other_args.action is ClaimAction.RUN  # same id, other arguments: another call
        other_session = await journal.claim(CallKey("s2", "call-1", "hash-a"), "write_file", {})
        assert other_session.action is ClaimAction.RUN


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


async def test_a_second_journal_sees_busy_until_the_owner_finishes(db: Path) -> None:
    first, second = SQLiteJournal(db), SQLiteJournal(db)
    assert (await first.claim(KEY, "t", {})).action is ClaimAction.RUN
    assert (await second.claim(KEY, "t", {})).action is ClaimAction.BUSY
    assert (await first.claim(KEY, "t", {})).action is ClaimAction.BUSY  # not twice in one
    waiting = asyncio.create_task(second.claim_when_free(KEY, "t", {}))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await first.finish(KEY, {"text": "first"})
    claim = await asyncio.wait_for(waiting, 5)
    assert claim.action is ClaimAction.REPLAY
    assert claim.entry.outcome == {"text": "first"}
    await first.close()
    await second.close()


def start_hanging_owner(db: Path, call_id: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(WORKER), "hang", str(db), call_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "run"
    return process


async def test_a_call_of_a_killed_process_is_interrupted_then_restartable(db: Path) -> None:
    process = start_hanging_owner(db, "c1")
    key = CallKey("crash", "c1", "h")
    async with SQLiteJournal(db) as journal:
        assert (await journal.claim(key, "slow", {})).action is ClaimAction.BUSY
        process.send_signal(signal.SIGKILL)
        process.wait()
        claim = await journal.claim(key, "slow", {})
        assert claim.action is ClaimAction.INTERRUPTED
        assert (claim.entry.state, claim.entry.attempt) == (CallState.RUNNING, 1)
        restarted = await journal.restart(key)
        assert restarted.attempt == 2
        await journal.finish(key, {"text": "second attempt"})
        assert (await journal.claim(key, "slow", {})).action is ClaimAction.REPLAY


async def test_abandon_leaves_the_call_interrupted(db: Path) -> None:
    async with SQLiteJournal(db) as journal:
        await journal.claim(KEY, "t", {})
        await journal.abandon(KEY)
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.INTERRUPTED


async def test_finish_without_a_claim_is_an_error(db: Path) -> None:
    async with SQLiteJournal(db) as journal:
        with pytest.raises(JournalError, match="not owned by this journal: claim it first"):
            await journal.finish(KEY, {"text": "?"})


async def test_a_claim_whose_caller_was_cancelled_is_undone(db: Path) -> None:
    async with SQLiteJournal(db) as journal:
        gate = threading.Event()
        blocker = asyncio.ensure_future(journal._submit(lambda conn: gate.wait(5)))
        claim = asyncio.ensure_future(journal.claim(KEY, "t", {}))
        await asyncio.sleep(0.02)
        claim.cancel()
        gate.set()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await claim
        await journal.entries()  # the undo ran before this, on the same writer thread
        assert await journal.entry(KEY) is None
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.RUN


def test_two_processes_share_one_journal_each_call_runs_once(db: Path, tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    count = 60
    processes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "share", str(db), str(effects), str(count)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    totals = [process.communicate(timeout=120)[0].split() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    lines = effects.read_text().splitlines()
    indexes = sorted(int(line.split()[0]) for line in lines)
    assert indexes == list(range(count))  # every call ran, none twice
    assert sum(int(ran) for ran, _ in totals) == count
    assert sum(int(ran) + int(replayed) for ran, replayed in totals) == 2 * count


async def test_runs_are_saved_and_loaded(db: Path) -> None:
    async with SQLiteJournal(db) as journal:
        assert await journal.load_run("chat") is None
        await journal.save_run("chat", {"messages": [{"role": "user", "content": "hi"}]})
        await journal.save_run("chat", {"messages": [], "turn": 2})
    async with SQLiteJournal(db) as journal:
        assert await journal.load_run("chat") == {"messages": [], "turn": 2}
        assert [name for name, _ in await journal.sessions()] == ["chat"]


async def test_prune_by_age_and_by_session_count(db: Path) -> None:
    async with SQLiteJournal(db) as journal:
        for session in ("old", "mid", "new"):
            for index in range(3):
                key = CallKey(session, f"c{index}", "h")
                await journal.claim(key, "t", {})
                await journal.finish(key, {"text": "x"})
            await journal.save_run(session, {})
            await asyncio.sleep(0.01)
        running = CallKey("new", "still-running", "h")
        await journal.claim(running, "t", {})
        assert await journal.prune(keep_sessions=2) == 3  # the old session's three calls
        remaining = {(e.key.session, e.state) for e in await journal.entries()}
        assert remaining == {("mid", "finished"), ("new", "finished"), ("new", "running")}
        assert await journal.prune(older_than=0) == 6
        assert [e.key for e in await journal.entries()] == [running]


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


def test_a_newer_journal_is_refused(db: Path) -> None:
    SQLiteJournal(db)  # creates it
    conn = sqlite3.connect(db)
    conn.execute("UPDATE toolbridge_meta SET value = '99'")
    conn.commit()
    with pytest.raises(JournalError, match=r"newer toolbridge \(schema version 99; this one"):
        SQLiteJournal(db)


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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 200 KiB file system (tmpfs): the journal fills it up for real."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"mounting a small tmpfs needs root: {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


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
