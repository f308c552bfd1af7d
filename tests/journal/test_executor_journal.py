"""The executor with a journal: a real process killed mid-batch, then the batch run again."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge import ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry, tool
from toolbridge.journal import SQLiteJournal

WORKER = Path(__file__).with_name("batch_worker.py")


def run_batch(workspace: Path, hang_at: str) -> list[list[object]]:
    done = subprocess.run(
        [sys.executable, str(WORKER), str(workspace), hang_at],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def kill_when_hanging(workspace: Path, hang_at: str) -> None:
    process = subprocess.Popen(
        [sys.executable, str(WORKER), str(workspace), hang_at], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "hanging"
    process.send_signal(signal.SIGKILL)
    process.wait()


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_killed_mid_batch_nothing_runs_twice_nothing_is_lost(workspace: Path) -> None:
    # First run: e0, e1 finish; the read-only peek finishes; e2 hangs after its effect.
    kill_when_hanging(workspace, "e2")
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2"]

    outcomes = {row[0]: row for row in run_batch(workspace, hang_at="none")}
    # Finished calls come back from the journal, not run again.
    for call_id, text in (("c0", "did e0"), ("c1", "did e1"), ("p", "saw p")):
        assert outcomes[call_id][2] == text
        assert outcomes[call_id][3] == {"replayed": True, "attempt": 1}
    # The interrupted side effect is reported, not re-run.
    assert outcomes["c2"][1] == "interrupted"
    assert "may have partly run" in str(outcomes["c2"][2])
    # The rest run now, once.
    assert outcomes["c3"][2] == "did e3" and outcomes["c3"][3] is None
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2", "e3"]
    assert lines(workspace / "peeks.txt") == ["p"]

    # A third run replays everything, the interrupted verdict included.
    again = {row[0]: row for row in run_batch(workspace, hang_at="none")}
    assert again["c2"][1] == "interrupted"
    assert all(row[3] == {"replayed": True, "attempt": 1} for row in again.values())
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2", "e3"]


def test_an_interrupted_read_only_call_runs_again(workspace: Path) -> None:
    kill_when_hanging(workspace, "p")
    assert lines(workspace / "peeks.txt") == ["p"]
    outcomes = {row[0]: row for row in run_batch(workspace, hang_at="none")}
    assert outcomes["p"][1] is None and outcomes["p"][2] == "saw p"
    assert lines(workspace / "peeks.txt") == ["p", "p"]  # read-only: safe to run again


async def test_same_call_id_with_other_arguments_is_another_call(workspace: Path) -> None:
    ran: list[int] = []

    @tool
    async def bump(n: int) -> int:
        """Side effect: counts runs."""
        ran.append(n)
        return n

    async with SQLiteJournal(workspace / "j.sqlite3") as journal:
        registry = ToolRegistry([bump], context=ToolContext(workspace=workspace))
        executor = ToolExecutor(registry, journal=journal)
        first = await executor.run([ToolCallRequest("c", "bump", {"n": 1})])
        again = await executor.run([ToolCallRequest("c", "bump", {"n": "1"})])  # cast: same
        other = await executor.run([ToolCallRequest("c", "bump", {"n": 2})])
    assert ran == [1, 2]
    assert first[0].result.text == again[0].result.text == "1"
    assert again[0].result.metadata["toolbridge.journal"]["replayed"] is True
    assert other[0].result.text == "2"


@pytest.mark.parametrize(
    "stored", ['{"content": 5}', '{"content": "x", "error_kind": "bogus"}', "not json"]
)
async def test_a_damaged_stored_outcome_is_a_journal_error_not_a_run(
    workspace: Path, stored: str
) -> None:
    ran: list[int] = []

    @tool
    async def bump(n: int) -> int:
        """Side effect: counts runs."""
        ran.append(n)
        return n

    db = workspace / "j.sqlite3"
    registry = ToolRegistry([bump], context=ToolContext(workspace=workspace))
    call = ToolCallRequest("c", "bump", {"n": 1})
    async with SQLiteJournal(db) as journal:
        await ToolExecutor(registry, journal=journal).run([call])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE toolbridge_calls SET outcome = ?", (stored,))
    conn.commit()
    conn.close()
    async with SQLiteJournal(db) as journal:
        executor = ToolExecutor(registry, journal=journal)
        [outcome] = await asyncio.wait_for(executor.run([call]), 60)
    assert ran == [1]  # not run again, and not reported as the tool's own failure
    assert (
        outcome.error is not None and "the call was not run: its journal" in outcome.error.message
    )
    assert "call 'c'" in outcome.error.message
