"""Calls that run together hand their outcomes to the journal and wait for them once: each
outcome is still durable before anyone sees it, and one that cannot be stored is said."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

from tests.journal.disk import fill_up
from tests.journal.waiting import until

from toolbridge import (
    ErrorKind,
    EventType,
    Outcomes,
    OutcomeStatus,
    ToolCallRequest,
    ToolContext,
    ToolEvent,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import SQLiteJournal


@tool(read_only=True)
async def echo(n: int) -> int:
    """Answer `n`."""
    await asyncio.sleep(0)
    return n


def stored_states(path: Path) -> dict[str, str]:
    """Each call's state as another reader of the file sees it now."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT call_id, state FROM toolbridge_calls"))


async def test_a_together_run_returns_only_once_every_outcome_is_on_disk(workspace: Path) -> None:
    # Durability "power": the writer thread stores the outcomes, so the run must wait for
    # them; a run that returned as its calls ended would show some still running.
    path = workspace / "j.sqlite3"
    registry = ToolRegistry([echo], context=ToolContext(workspace=workspace, session="s"))
    async with SQLiteJournal(path, durability="power") as journal:
        executor = ToolExecutor(registry, journal=journal)
        calls = [ToolCallRequest(f"c{i}", "echo", {"n": i}) for i in range(50)]
        outcomes = await executor.run(calls)
        states = stored_states(path)
    assert [outcome.result.text for outcome in outcomes] == [str(i) for i in range(50)]
    assert states == {f"c{i}": "finished" for i in range(50)}


async def test_a_listener_hears_of_a_together_call_only_once_its_outcome_is_stored(
    workspace: Path,
) -> None:
    path = workspace / "j.sqlite3"
    registry = ToolRegistry([echo], context=ToolContext(workspace=workspace, session="s"))
    seen: dict[str, str] = {}

    def listener(event: ToolEvent) -> None:
        if event.type is EventType.CALL_FINISHED:
            seen[event.call.id] = stored_states(path)[event.call.id]

    async with SQLiteJournal(path, durability="power") as journal:
        executor = ToolExecutor(registry, journal=journal, listeners=[listener])
        await executor.run([ToolCallRequest(f"c{i}", "echo", {"n": i}) for i in range(20)])
    assert seen == {f"c{i}": "finished" for i in range(20)}


async def test_together_outcomes_that_cannot_be_stored_are_said_and_let_go(
    workspace: Path, small_disk: Path
) -> None:
    # The disk fills up while the calls run: no outcome can be stored. Each says so, and
    # each call is let go (found interrupted next time, not busy forever).
    filler = small_disk / "filler"
    ran: list[str] = []

    @tool(read_only=True)
    async def fill(label: str) -> str:
        """Side effect: fills the disk the journal is on (the first time)."""
        ran.append(label)
        if filler.exists() or ran.count(label) > 1:
            return "no room"
        fill_up(filler)
        return "filled " + "y" * 20_000

    registry = ToolRegistry([fill], context=ToolContext(workspace=workspace, session="s"))
    calls = [ToolCallRequest(f"c{i}", "fill", {"label": str(i)}) for i in range(3)]
    async with SQLiteJournal(small_disk / "j.sqlite3") as journal:
        outcomes = await ToolExecutor(registry, journal=journal).run(calls)
        for outcome in outcomes:
            assert outcome.ok, outcome.result.text  # the calls ran: their results are kept
            said = outcome.result.metadata["toolbridge.journal"]
            assert said["recorded"] is False and "full" in said["error"]
        filler.unlink()  # space again
        # Kept busy by this journal, the next claims would wait forever; let go, these
        # read-only calls run again at once, as a second attempt.
        again = await asyncio.wait_for(ToolExecutor(registry, journal=journal).run(calls), 30)
    assert sorted(ran) == ["0", "0", "1", "1", "2", "2"]
    assert [outcome.ok for outcome in again] == [True, True, True]
    assert all(outcome.kind is not ErrorKind.INTERRUPTED for outcome in again)
    with contextlib.closing(sqlite3.connect(small_disk / "j.sqlite3")) as conn:
        rows = set(conn.execute("SELECT call_id, state, attempt FROM toolbridge_calls"))
    assert rows == {(f"c{i}", "finished", 2) for i in range(3)}


async def test_a_stopped_together_run_keeps_the_outcomes_already_stored(workspace: Path) -> None:
    # Two calls finish (stored) while a third waits; the run is stopped. The two that
    # finished keep their outcomes, the third is cancelled: what a stop answers does not
    # depend on whether its calls shared one wait for the journal.
    path = workspace / "j.sqlite3"
    release = asyncio.Event()

    @tool(read_only=True)
    async def step(n: int) -> int:
        """Answer `n`; n == 0 waits to be released."""
        if n == 0:
            await release.wait()
        return n

    registry = ToolRegistry([step], context=ToolContext(workspace=workspace, session="s"))
    async with SQLiteJournal(path) as journal:
        executor = ToolExecutor(registry, journal=journal)
        into = Outcomes()
        calls = [ToolCallRequest(f"c{i}", "step", {"n": i}) for i in range(3)]
        run = asyncio.ensure_future(executor.run(calls, into=into))
        both_stored = {"c0": "running", "c1": "finished", "c2": "finished"}
        await until(lambda: stored_states(path) == both_stored, "c1 and c2 were never stored")
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
    by_id = {outcome.call.id: outcome for outcome in into}
    assert by_id["c1"].ok and by_id["c1"].result.text == "1"
    assert by_id["c2"].ok and by_id["c2"].result.text == "2"
    assert by_id["c0"].status is OutcomeStatus.CANCELLED
