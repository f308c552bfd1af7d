"""A together-run stopped while an outcome it could not store (a full disk) was on its
way into the journal still lets go of that call: found interrupted next time, not kept
busy by this process for as long as it lives."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.journal.disk import fill_up
from tests.journal.waiting import until

from toolbridge import Outcomes, ToolCallRequest, ToolContext, ToolExecutor, ToolRegistry, tool
from toolbridge.journal import CallJournal, SQLiteJournal
from toolbridge.journal.base import CallKey
from toolbridge.journal.postgres import PostgresJournal


class WatchedJournal(SQLiteJournal):
    """A real SQLite journal that keeps the futures of the outcomes handed to it, so a
    test can wait until the journal has answered one."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.storing: list[asyncio.Future[None]] = []

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        future = super().finish_soon(key, outcome, error_kind=error_kind)
        self.storing.append(future)
        return future


async def test_a_stopped_run_lets_go_of_an_outcome_it_could_not_store(
    workspace: Path, small_disk: Path
) -> None:
    filler = small_disk / "filler"
    release = asyncio.Event()
    filled: list[bool] = []

    @tool(read_only=True)
    async def step(n: int) -> str:
        """n == 0 holds the run open; n == 1 fills the disk the journal is on (once)."""
        if n == 0:
            await release.wait()
            return "0"
        if filled:
            return "again"
        filled.append(True)
        fill_up(filler)
        return "filled " + "y" * 20_000

    registry = ToolRegistry([step], context=ToolContext(workspace=workspace, session="s"))
    calls = [ToolCallRequest(f"c{i}", "step", {"n": i}) for i in range(2)]
    async with WatchedJournal(small_disk / "j.sqlite3") as journal:
        run = asyncio.ensure_future(
            ToolExecutor(registry, journal=journal).run(calls, into=Outcomes())
        )
        await until(
            lambda: bool(journal.storing) and journal.storing[0].done(),
            "c1's outcome never reached the journal",
        )
        assert journal.storing[0].exception() is not None  # the disk is full
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        filler.unlink()  # space again
        # Kept busy by this journal, the claim would wait forever; let go, the read-only
        # call runs again at once.
        again = await asyncio.wait_for(ToolExecutor(registry, journal=journal).run(calls[1:]), 30)
    assert again[0].ok and again[0].result.text == "again"


class Stopping(CallJournal):
    """A real journal that stops `run` just as an outcome is handed to it: the stop lands
    while the call waits for its outcome to be stored."""

    run: asyncio.Future[Any] | None = None

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        future = super().finish_soon(key, outcome, error_kind=error_kind)
        if self.run is not None:
            self.run.cancel()
        return future


class StoppingJournal(Stopping, SQLiteJournal):
    """`Stopping` on SQLite."""


class StoppingPostgres(Stopping, PostgresJournal):
    """`Stopping` on PostgreSQL."""


async def test_a_call_stopped_while_its_outcome_fails_to_be_stored_is_let_go(
    workspace: Path, small_disk: Path
) -> None:
    # One call, not run together: it waits for its own outcome to be stored, and is
    # stopped then. The disk is full, so the outcome is not stored; the call is let go.
    filler = small_disk / "filler"
    filled: list[bool] = []

    @tool(read_only=True)
    async def fill() -> str:
        """Fills the disk the journal is on (the first time)."""
        if filled:
            return "again"
        filled.append(True)
        fill_up(filler)
        return "filled " + "y" * 20_000

    registry = ToolRegistry([fill], context=ToolContext(workspace=workspace, session="s"))
    calls = [ToolCallRequest("c1", "fill", {})]
    async with StoppingJournal(small_disk / "j.sqlite3") as journal:
        run = asyncio.ensure_future(ToolExecutor(registry, journal=journal).run(calls))
        journal.run = run
        with contextlib.suppress(asyncio.CancelledError):
            await run
        journal.run = None
        assert filled
        filler.unlink()  # space again
        again = await asyncio.wait_for(ToolExecutor(registry, journal=journal).run(calls), 30)
    assert again[0].ok and again[0].result.text == "again"


async def test_a_call_stopped_while_its_outcome_is_stored_stays_finished(
    workspace: Path, journal_target: str
) -> None:
    # Stopped while its outcome is stored (and the store succeeds): letting go of the
    # call then changes nothing; the next run replays its outcome, the tool ran once.
    ran: list[bool] = []

    @tool
    async def once() -> str:
        """Neither read-only nor idempotent: it must not run twice."""
        ran.append(True)
        return "done"

    registry = ToolRegistry([once], context=ToolContext(workspace=workspace, session="s"))
    calls = [ToolCallRequest("c1", "once", {})]
    journal: Stopping
    if journal_target.startswith("postgres"):
        journal = await StoppingPostgres.connect(journal_target)
    else:
        journal = StoppingJournal(Path(journal_target))
    async with journal:
        run = asyncio.ensure_future(ToolExecutor(registry, journal=journal).run(calls))
        journal.run = run
        with contextlib.suppress(asyncio.CancelledError):
            await run
        journal.run = None
        again = await asyncio.wait_for(ToolExecutor(registry, journal=journal).run(calls), 30)
        entries = await journal.entries(session="s")
    assert again[0].ok and again[0].result.text == "done"
    assert ran == [True]
    assert [(entry.key.call_id, entry.state.value, entry.attempt) for entry in entries] == [
        ("c1", "finished", 1)
    ]
