"""Queued and started calls across a SIGKILL: only a call whose tool started may come
back interrupted; a call that was waiting to start runs on restart as attempt 1.

A real worker process (queued_worker.py) runs a batch whose work blocks once started and
is killed while some calls run and the others wait, on SQLite and on a real PostgreSQL
server. They wait for a slot (six calls, max_concurrency=2), or, sync function tools on a
one-thread pool, for the thread (four calls): such a call is claimed queued and its thread
asks for the running mark before it runs the function.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolbridge.journal import CallState, open_journal

WORKER = Path(__file__).with_name("queued_worker.py")
LIMIT = 60.0  # only a real hang reaches it


def started(workspace: Path) -> list[str]:
    path = workspace / "started.txt"
    return path.read_text().split() if path.exists() else []


def wait_for_starts(workspace: Path, count: int, worker: subprocess.Popen[str]) -> list[str]:
    deadline = time.monotonic() + LIMIT
    while len(labels := started(workspace)) < count:
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, f"only {labels} started"
        time.sleep(0.02)
    return labels


async def states(target: str) -> dict[str, tuple[CallState, int]]:
    async with await open_journal(target) as journal:
        return {e.key.call_id: (e.state, e.attempt) for e in await journal.entries(session="s")}


def export(target: str, cwd: Path) -> dict[str, str]:
    """The state of each call of session "s" as ``toolbridge journal export`` prints it."""
    done = subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", "export", "--journal", target],
        cwd=cwd, capture_output=True, text=True, timeout=LIMIT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {row["call_id"]: row["state"] for row in map(json.loads, done.stdout.splitlines())}


@pytest.mark.parametrize(
    ("waits_for", "calls", "slots"), [("slots", 6, 2), ("thread", 4, 1)], ids=["slots", "thread"]
)
def test_queued_calls_of_a_killed_process_run_as_first_attempts(
    journal_target: str, tmp_path: Path, waits_for: str, calls: int, slots: int
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    argv = [sys.executable, str(WORKER), str(workspace), journal_target]
    worker = subprocess.Popen([*argv, "hang", waits_for], stdout=subprocess.PIPE, text=True)
    try:
        first = wait_for_starts(workspace, slots, worker)
        live = asyncio.run(states(journal_target))
        # The calls holding the slots (the thread) run; the others are claimed and wait.
        waiting = ["queued"] * (calls - slots)
        assert sorted(state for state, _ in live.values()) == waiting + ["running"] * slots
        assert {call for call, (state, _) in live.items() if state == "running"} == set(first)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=LIMIT)
    assert started(workspace) == first  # nothing else started

    # Read at once, before any run opens the journal: the owner's lock is gone, so the
    # calls that started are interrupted, and those that waited are still queued.
    after_kill = asyncio.run(states(journal_target))
    assert {c for c, (s, _) in after_kill.items() if s is CallState.INTERRUPTED} == set(first)
    assert [s for c, (s, _) in after_kill.items() if c not in first] == [CallState.QUEUED] * (
        calls - slots
    )
    exported = export(journal_target, tmp_path)
    assert exported == {call: state.value for call, (state, _) in after_kill.items()}

    rerun = subprocess.run(
        [*argv, "run", waits_for], capture_output=True, text=True, timeout=LIMIT, check=False
    )
    assert rerun.returncode == 0, rerun.stderr
    outcomes = {row[0]: row[1:] for row in map(json.loads, rerun.stdout.splitlines())}
    waited = [call for call in outcomes if call not in first]
    for call in waited:  # never started: run now, as new calls, with nothing to approve
        assert outcomes[call] == [None, None, False], (call, outcomes[call])
    for call in first:
        if call.startswith("e"):  # started, not safe to repeat: interrupted, a retry is asked
            assert outcomes[call][0] == "interrupted" and outcomes[call][2] is True
        else:  # started and read-only: run again, as attempt 2
            assert outcomes[call][0] is None
    final = asyncio.run(states(journal_target))
    for call in waited:
        assert final[call] == (CallState.FINISHED, 1)
    for call in first:
        assert final[call] == (CallState.FINISHED, 1 if call.startswith("e") else 2)
    effects = started(workspace)
    assert sorted(effects) == sorted(first + waited + [c for c in first if c.startswith("p")])
