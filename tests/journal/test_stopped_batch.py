"""A stop that lands in a transaction the SQLite journal writes on the event loop (a
signal whose handler exits) undoes that transaction and leaves the loop's other
operations to be written: ``asyncio.run`` then ends, its cancelled calls let go of in
the journal, instead of waiting forever for operations never handed to the writer.

A real worker process (stopped_batch_worker.py) is stopped while its calls run; a stop in
one part of a hand-over is raised in this process by an operation."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge.journal import CallKey, JournalError, SQLiteJournal

WORKER = Path(__file__).with_name("stopped_batch_worker.py")
LIMIT = 60.0  # only a real hang reaches it


def test_a_stop_in_a_batch_on_the_loop_lets_the_run_end_and_its_calls_go(
    workspace: Path,
) -> None:
    path = workspace / "j.sqlite3"
    try:
        done = subprocess.run(
            [sys.executable, str(WORKER), str(workspace), str(path)],
            capture_output=True,
            text=True,
            timeout=LIMIT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the stopped worker never ended: {exc.stderr!r}") from exc
    assert done.returncode == 3, done.stderr  # its handler's exit, after asyncio.run ended
    with sqlite3.connect(path) as reader:
        rows = reader.execute("SELECT call_id, state, owner FROM toolbridge_calls").fetchall()
    # Each call was let go as it was cancelled (running, no owner: interrupted), which
    # the writer stored after the stopped transaction was undone.
    assert sorted(rows) == [(f"c{i}", "running", None) for i in range(8)], done.stderr


def test_a_stop_in_one_part_of_a_batch_still_hands_the_later_parts_over(
    workspace: Path,
) -> None:
    # Two operations on one call go in two transactions of one hand-over (`_part`). A stop
    # landing in the first (here its operation exits, as a signal's handler would) left
    # the second never handed to the writer: a program that went on after the stop waited
    # for its answer for ever. Now the later parts go to the writer thread.
    key = CallKey("s", "c", "h")
    journal = SQLiteJournal(workspace / "j.sqlite3")
    loop = asyncio.new_event_loop()
    submitted: list[asyncio.Future[object]] = []

    def stopping(conn: sqlite3.Connection) -> None:
        raise SystemExit(3)

    async def both() -> None:
        submitted.append(asyncio.ensure_future(journal._submit(stopping, calls=(key,))))
        submitted.append(
            asyncio.ensure_future(journal._submit(lambda conn: "written", calls=(key,)))
        )
        await asyncio.wait(submitted)

    try:
        with pytest.raises(SystemExit):
            loop.run_until_complete(both())
        stopped, later = submitted
        assert loop.run_until_complete(asyncio.wait_for(later, LIMIT)) == "written"
        with pytest.raises(JournalError, match="was stopped"):
            loop.run_until_complete(stopped)
        loop.run_until_complete(journal.close())
    finally:
        loop.close()
