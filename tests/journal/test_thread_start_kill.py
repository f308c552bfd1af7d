"""A process killed mid-batch of sync tool calls on a one-thread pool: the call the thread
ran may have partly run (interrupted); the ones that waited for the thread never ran, so
the next run runs them as first attempts with nothing to approve. A real worker process
(thread_worker.py) is SIGKILLed, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.journal.test_queued_calls import LIMIT, started, states, wait_for_starts

from toolbridge.journal import CallState

WORKER = Path(__file__).with_name("thread_worker.py")


def test_sync_calls_waiting_for_a_thread_of_a_killed_process_run_as_first_attempts(
    journal_target: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    argv = [sys.executable, str(WORKER), str(workspace), journal_target]
    worker = subprocess.Popen([*argv, "hang"], stdout=subprocess.PIPE, text=True)
    try:
        first = wait_for_starts(workspace, 1, worker)
        live = asyncio.run(states(journal_target))
        assert sorted(state for state, _ in live.values()) == ["queued"] * 3 + ["running"]
        assert live[first[0]][0] == "running"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=LIMIT)
    assert started(workspace) == first  # nothing else started

    after_kill = asyncio.run(states(journal_target))
    assert {c for c, (s, _) in after_kill.items() if s is CallState.INTERRUPTED} == set(first)
    assert [s for c, (s, _) in after_kill.items() if c not in first] == [CallState.QUEUED] * 3

    rerun = subprocess.run(
        [*argv, "run"], capture_output=True, text=True, timeout=LIMIT, check=False
    )
    assert rerun.returncode == 0, rerun.stderr
    outcomes = {row[0]: row[1:] for row in map(json.loads, rerun.stdout.splitlines())}
    waited = [call for call in outcomes if call not in first]
    for call in waited:  # never started: run now, as new calls, with nothing to approve
        assert outcomes[call] == [None, None, False], (call, outcomes[call])
    final = asyncio.run(states(journal_target))
    for call in waited:
        assert final[call] == (CallState.FINISHED, 1)
    (ran,) = first
    if ran.startswith("e"):  # started, not safe to repeat: interrupted, a retry is asked
        assert outcomes[ran][0] == "interrupted" and outcomes[ran][2] is True
        assert final[ran] == (CallState.FINISHED, 1)
    else:  # started and read-only: run again, as attempt 2
        assert outcomes[ran][0] is None and final[ran] == (CallState.FINISHED, 2)
