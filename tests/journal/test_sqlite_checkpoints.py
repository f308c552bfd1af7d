"""The SQLite journal copies its WAL back into the file on its writer thread: a batch run
on the event loop never waits for a checkpoint (about 12 ms for a thousand pages here)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest
from tests.journal.waiting import until

from toolbridge import ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry, tool
from toolbridge.journal import JournalError, SQLiteJournal, sqlite_writer


@tool(read_only=True)
async def echo(text: str) -> str:
    """Answer `text`."""
    await asyncio.sleep(0)
    return text


async def test_checkpoints_run_on_the_writer_thread_never_on_the_loop(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "CHECKPOINT_PAGES", 100)  # soon, not after 4 MB
    path = workspace / "j.sqlite3"
    checkpoints: list[str] = []  # the thread each checkpoint ran on
    registry = ToolRegistry([echo], context=ToolContext(workspace=workspace, session="s"))
    async with SQLiteJournal(path) as journal:
        assert journal._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)

        def traced(statement: str) -> None:
            if "wal_checkpoint" in statement:
                checkpoints.append(threading.current_thread().name)

        journal._conn.set_trace_callback(traced)
        executor = ToolExecutor(registry, journal=journal)
        for round_no in range(12):  # each batch writes about 40 pages
            calls = [ToolCallRequest(f"r{round_no}-{i}", "echo", {"text": "x" * 500})
                     for i in range(50)]  # fmt: skip
            assert all(outcome.ok for outcome in await executor.run(calls))
            # The thread has taken up the checkpoint asked for (the next batch waits for it
            # to end): on a busy machine the loop would otherwise run ahead of the thread,
            # and the WAL would grow by a few batches more before it is cut back.
            await until(lambda: not journal._checkpoint_asked, "the checkpoint never ran")
        await until(lambda: bool(checkpoints), "the WAL was never checkpointed")
        wal_pages = path.with_name("j.sqlite3-wal").stat().st_size // 4096
    assert all(name.startswith("toolbridge-journal") for name in checkpoints), checkpoints
    # Once per hundred pages or so (about 480 written): not after every batch once the WAL
    # had been that long once, and the WAL was cut back each time, not left to grow.
    assert 1 <= len(checkpoints) <= 6, checkpoints
    assert wal_pages < 150


async def test_a_checkpoint_asked_behind_a_failing_batch_still_runs(workspace: Path) -> None:
    # The loop asked for a checkpoint (once: it asks again only after one ran), and the
    # writer thread found the request behind a batch that failed. Dropped with it, the
    # request would leave the loop never asking again: a WAL that grows until reopened.
    checkpoints: list[str] = []
    async with SQLiteJournal(workspace / "j.sqlite3") as journal:
        journal._conn.set_trace_callback(
            lambda statement: checkpoints.append(statement) if "checkpoint" in statement else None
        )
        loop = asyncio.get_running_loop()

        def failing(conn: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        held = loop.create_future()
        failed = loop.create_future()
        with journal._writing:  # the thread takes the first batch, then waits for the lock
            journal._put([sqlite_writer.Job(lambda conn: None, loop, held)])
            await until(journal._jobs.empty, "the writer never took the batch")
            journal._put([sqlite_writer.Job(failing, loop, failed)])
            journal._checkpoint_asked = True  # as `_checkpoint_soon` does on the loop
            journal._jobs.put(sqlite_writer._CHECKPOINT)
        await asyncio.wait([held, failed])  # (the two may have gone in one batch)
        assert isinstance(failed.exception(), JournalError)
        await until(lambda: not journal._checkpoint_asked, "the checkpoint was dropped")
    assert any("wal_checkpoint" in statement for statement in checkpoints)
