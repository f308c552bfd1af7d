"""The executor with a journal: a real process killed mid-batch, then the batch run again."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.journal.disk import fill_up

from toolbridge import (
    ErrorKind,
    OutcomeStatus,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.execution.approval import arguments_digest
from toolbridge.journal import CallKey, SQLiteJournal

WORKER = Path(__file__).with_name("batch_worker.py")


def run_batch(workspace: Path, hang_at: str) -> list[list[object]]:
    return run_rounds(workspace, hang_at)[0]


def run_rounds(workspace: Path, hang_at: str, *decide: str) -> list[list[list[object]]]:
    """Run the batch in a new process; with `decide`, decide on interrupted calls and run
    it again in the same process. The outcome rows of each round."""
    done = subprocess.run(
        [sys.executable, str(WORKER), str(workspace), hang_at, *decide],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    rounds: list[list[list[object]]] = [[]]
    for line in done.stdout.splitlines():
        if line == "decided":
            rounds.append([])
        elif line.startswith("["):
            rounds[-1].append(json.loads(line))
    return rounds


def by_id(rows: list[list[object]]) -> dict[object, list[object]]:
    return {row[0]: row for row in rows}


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


def test_an_interrupted_call_runs_again_once_when_the_user_approves(workspace: Path) -> None:
    kill_when_hanging(workspace, "e2")
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2"]

    # Denied: the interrupted error comes back, and the call does not run.
    before, after = (by_id(rows) for rows in run_rounds(workspace, "none", "deny"))
    assert before["c2"][1] == "interrupted" and before["c2"][4] is True  # a retry to decide
    assert after["c2"][1] == "interrupted" and after["c2"][4] is True
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2", "e3"]

    # Undecided, in a new process: still the interrupted error, still not run.
    assert by_id(run_batch(workspace, "none"))["c2"][1] == "interrupted"
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2", "e3"]

    # Approved: it runs once more, as its second attempt; the other calls replay.
    before, after = (by_id(rows) for rows in run_rounds(workspace, "none", "approve"))
    assert before["c2"][1] == "interrupted"
    assert after["c2"][1:] == [None, "did e2", None, False]
    assert after["c0"][2:4] == ["did e0", {"replayed": True, "attempt": 1}]
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2", "e3", "e2"]

    # From now on its real outcome replays, even when approved again: usable once.
    before, after = (by_id(rows) for rows in run_rounds(workspace, "none", "approve"))
    for rows in (before, after):
        assert rows["c2"][1:] == [None, "did e2", {"replayed": True, "attempt": 2}, False]
    assert lines(workspace / "effects.txt") == ["e0", "e1", "e2", "e3", "e2"]


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


async def test_a_retry_approval_is_bound_to_its_arguments_and_used_once(workspace: Path) -> None:
    ran: list[str] = []
    started = asyncio.Event()

    @tool(requires_approval=True)
    async def send(to: str) -> str:
        """Side effect: sends a message (the first send hangs until cancelled)."""
        ran.append(to)
        if len(ran) == 1:
            started.set()
            await asyncio.sleep(3600)
        return f"sent to {to}"

    registry = ToolRegistry([send], context=ToolContext(workspace=workspace, session="s"))
    call = ToolCallRequest("c", "send", {"to": "a"})
    async with SQLiteJournal(workspace / "j.sqlite3") as journal:
        executor = ToolExecutor(registry, journal=journal)
        executor.approve((await executor.run([call])).pending[0])
        stopped = asyncio.ensure_future(executor.run([call]))
        await started.wait()
        stopped.cancel()  # stopped mid-way: it may have partly run
        with pytest.raises(asyncio.CancelledError):
            await stopped

        executor = ToolExecutor(registry, journal=journal)  # as after a restart
        [interrupted] = await executor.run([call])  # only its retry is asked, not approval
        assert interrupted.kind is ErrorKind.INTERRUPTED and interrupted.approval is not None
        assert interrupted.approval.retry and interrupted.approval.arguments == {"to": "a"}
        executor.approve(interrupted)
        [other] = await executor.run([ToolCallRequest("c", "send", {"to": "b"})])
        assert other.status is OutcomeStatus.PENDING_APPROVAL  # other arguments: not approved
        [retried] = await executor.run([call])  # the retry approves the run: no second prompt
        assert retried.ok and retried.result.text == "sent to a" and retried.approval is None
        assert ran == ["a", "a"]

        executor.approve(interrupted)  # approved again: it finished, so it replays
        [replayed] = await executor.run([call])
        assert replayed.result.metadata["toolbridge.journal"] == {"replayed": True, "attempt": 2}
        assert ran == ["a", "a"] and len(executor.retries) == 0
        entry = await journal.entry(CallKey("s", "c", interrupted.approval.digest))
    assert entry is not None and entry.approval is not None and entry.approval["retry"] is True


async def test_a_retry_is_not_approved_by_an_ordinary_approval(workspace: Path) -> None:
    ran: list[int] = []

    @tool
    async def bump(n: int) -> int:
        """Side effect: counts runs."""
        ran.append(n)
        return n

    registry = ToolRegistry([bump], context=ToolContext(workspace=workspace, session="s"))
    call = ToolCallRequest("c", "bump", {"n": 1})
    async with SQLiteJournal(workspace / "j.sqlite3") as journal:
        digest = arguments_digest("bump", {"n": 1})
        await journal.claim(CallKey("s", "c", digest), "bump", {"n": 1})
        await journal.abandon(CallKey("s", "c", digest))  # as if its process had died
        executor = ToolExecutor(registry, journal=journal)
        [interrupted] = await executor.run([call])
        assert interrupted.approval is not None
        executor.approve(replace(interrupted.approval, retry=False))  # not the retry
        [still] = await executor.run([call])
        executor.deny(interrupted, "it ran")
        [denied] = await executor.run([call])
    assert ran == []
    assert still.kind is denied.kind is ErrorKind.INTERRUPTED
    assert denied.result.metadata["toolbridge.journal"] == {"replayed": True, "attempt": 1}


async def test_a_call_the_journal_holds_is_not_asked_about_again(workspace: Path) -> None:
    # Resuming after a crash sends the same calls again: one that finished replays, and one
    # that was interrupted asks only about its retry, never for a second approval.
    ran: list[str] = []

    @tool(requires_approval=True)
    async def send(to: str) -> str:
        """Side effect: sends a message."""
        ran.append(to)
        return f"sent to {to}"

    context = ToolContext(workspace=workspace, session="s")
    async with SQLiteJournal(workspace / "j.sqlite3") as journal:
        first = ToolExecutor(ToolRegistry([send], context=context), journal=journal)
        pending = await first.run([ToolCallRequest("c1", "send", {"to": "ann"})])
        assert pending[0].status is OutcomeStatus.PENDING_APPROVAL
        first.approve(pending[0])
        assert (await first.run([ToolCallRequest("c1", "send", {"to": "ann"})]))[0].ok
        key = CallKey("s", "c2", arguments_digest("send", {"to": "bob"}))
        await journal.claim(key, "send", {"to": "bob"})
        await journal.abandon(key)  # what a process killed while sending leaves

        resumed = ToolExecutor(ToolRegistry([send], context=context), journal=journal)
        replayed, interrupted = await resumed.run(
            [
                ToolCallRequest("c1", "send", {"to": "ann"}),
                ToolCallRequest("c2", "send", {"to": "bob"}),
            ]
        )
    assert replayed.ok and replayed.result.text == "sent to ann"
    assert replayed.result.metadata["toolbridge.journal"]["replayed"] is True
    assert interrupted.status is not OutcomeStatus.PENDING_APPROVAL
    assert interrupted.kind is ErrorKind.INTERRUPTED
    assert interrupted.approval is not None and interrupted.approval.retry
    assert ran == ["ann"]


async def test_a_call_whose_outcome_could_not_be_stored_is_interrupted_not_busy_forever(
    workspace: Path, small_disk: Path
) -> None:
    # The disk fills up while a call runs, so its outcome cannot be stored ("free space,
    # then retry"). Run again once there is space: the call is interrupted (it ran, its
    # outcome is lost). It stayed owned by this journal: every later claim waited forever.
    filler = small_disk / "filler"
    ran: list[str] = []

    @tool
    async def fill(label: str) -> str:
        """Side effect: fills the disk the journal is on."""
        ran.append(label)
        fill_up(filler)
        return "filled " + "y" * 20_000

    registry = ToolRegistry([fill], context=ToolContext(workspace=workspace, session="s"))
    call = ToolCallRequest("c", "fill", {"label": "a"})
    async with SQLiteJournal(small_disk / "j.sqlite3") as journal:
        executor = ToolExecutor(registry, journal=journal)
        [first] = await executor.run([call])
        assert first.result.metadata["toolbridge.journal"]["recorded"] is False
        filler.unlink()  # space again
        [again] = await asyncio.wait_for(executor.run([call]), 30)
    assert again.kind is ErrorKind.INTERRUPTED
    assert ran == ["a"]
