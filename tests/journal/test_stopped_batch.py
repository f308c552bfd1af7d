"""A stop that lands in a transaction the SQLite journal writes on the event loop (a
signal whose handler exits) undoes that transaction and leaves the loop's other
operations to be written: ``asyncio.run`` then ends, its cancelled calls let go of in
the journal, instead of waiting forever for operations never handed to the writer.

A real worker process (stopped_batch_worker.py) is stopped while its calls run."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

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
