"""Closing a SQLite journal while operations wait to be gathered: a claim whose caller was
cancelled meanwhile is not run at close (nobody would undo it then, and the call, which
never ran, would read as interrupted), and the others are answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolbridge.journal import CallKey, CallState, ClaimAction, SQLiteJournal

LIMIT = 30.0  # only a real hang reaches it


async def test_a_claim_whose_caller_is_gone_is_not_run_by_close(workspace: Path) -> None:
    path = workspace / "j.sqlite3"
    gone, heard = CallKey("s", "gone", "h"), CallKey("s", "heard", "h")
    journal = SQLiteJournal(path)
    cancelled = asyncio.ensure_future(journal.claim(gone, "t", {}))
    answered = asyncio.ensure_future(journal.claim(heard, "t", {}))
    await asyncio.sleep(0)  # both claims submitted, neither handed to the writer yet
    assert len(journal._pending[asyncio.get_running_loop()]) == 2
    cancelled.cancel()
    await journal.close()  # in this turn: the jobs are still waiting to be gathered
    assert cancelled.cancelled()
    assert (await asyncio.wait_for(answered, LIMIT)).action is ClaimAction.RUN
    async with SQLiteJournal(path) as again:
        assert await again.entry(gone) is None  # never happened
        claim = await again.claim(gone, "t", {})
        assert claim.action is ClaimAction.RUN and claim.entry.attempt == 1
        assert (await again.claim(heard, "t", {})).action is ClaimAction.INTERRUPTED


async def test_an_outcome_nobody_waits_for_is_still_stored_by_close(workspace: Path) -> None:
    path = workspace / "j.sqlite3"
    key = CallKey("s", "ran", "h")
    journal = SQLiteJournal(path)
    assert (await journal.claim(key, "t", {})).action is ClaimAction.RUN
    storing = journal.finish_soon(key, {"text": "done"})
    storing.cancel()  # its caller stopped waiting: the call ran all the same
    await journal.close()  # in this turn: the jobs are still waiting to be gathered
    async with SQLiteJournal(path) as again:
        entry = await again.entry(key)
        assert entry is not None and entry.state is CallState.FINISHED, entry
        assert entry.outcome == {"text": "done"}
