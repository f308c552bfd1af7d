"""The SQLite journal copies its WAL back into the file on its writer thread: a batch run
on the event loop never waits for a checkpoint (about 12 ms for a thousand pages here)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from tests.journal.waiting import until

from toolbridge import ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry, tool
from toolbridge.journal import SQLiteJournal, sqlite_writer


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
        await until(lambda: bool(checkpoints), "the WAL was never checkpointed")
        wal_pages = path.with_name("j.sqlite3-wal").stat().st_size // 4096
    assert all(name.startswith("toolbridge-journal") for name in checkpoints), checkpoints
    # Once per hundred pages or so (about 480 written): not after every batch once the WAL
    # had been that long once, and the WAL was cut back each time, not left to grow.
    assert 1 <= len(checkpoints) <= 6, checkpoints
    assert wal_pages < 150
