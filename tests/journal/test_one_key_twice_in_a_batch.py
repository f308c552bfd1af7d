"""Two operations on one call sent in the same turn of the loop (so in one writer batch)
are answered as they would be one after the other, on both backends: a start and then an
outcome, a claim and then an outcome, two outcomes (the second is not the call's: it was
let go of), a claim and letting go of it, a call let go of and claimed again. A writer
applies a batch in an order of its own (PostgreSQL's one statement changes a row once and
decides ownership first; SQLite writes new rows, starts and outcomes at commit), so the
later operation on a call waits for the next part. Real SQLite files, a real PostgreSQL
server."""

from __future__ import annotations

import asyncio
from typing import Any

from toolbridge.journal import CallKey, CallState, ClaimAction, JournalError, open_journal


def key(name: str) -> CallKey:
    return CallKey("twice", name, "h")


def answer(value: Any) -> str:
    if isinstance(value, JournalError):
        return "not owned" if "not owned" in str(value) else f"error: {value}"
    if isinstance(value, BaseException):
        raise value
    action = getattr(value, "action", None)
    return action.name if isinstance(action, ClaimAction) else repr(value)


async def test_a_start_and_the_outcome_in_one_batch(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        await journal.claim(key("q"), "t", {}, queued=True)
        await journal.claim(key("other"), "t", {}, queued=True)
        answers = await asyncio.gather(
            journal.start(key("q")),
            journal.start(key("other")),
            journal.finish(key("q"), {"text": "done"}),
            return_exceptions=True,
        )
        assert [answer(a) for a in answers] == ["None", "None", "None"]
        entry = await journal.entry(key("q"))
        assert entry is not None and entry.state is CallState.FINISHED
        assert entry.outcome == {"text": "done"} and entry.started_at is not None
        other = await journal.entry(key("other"))
        assert other is not None and other.state is CallState.RUNNING
        await journal.finish(key("other"), {"text": "later"})  # still this journal's


async def test_a_claim_and_its_outcome_in_one_batch(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        answers = await asyncio.gather(
            journal.claim(key("c"), "t", {}),
            journal.finish(key("c"), {"text": "done"}),
            return_exceptions=True,
        )
        assert [answer(a) for a in answers] == ["RUN", "None"]
        entry = await journal.entry(key("c"))
        assert entry is not None and entry.state is CallState.FINISHED
        assert entry.outcome == {"text": "done"}


async def test_two_outcomes_of_one_call_in_one_batch_store_the_first(
    journal_target: str,
) -> None:
    async with await open_journal(journal_target) as journal:
        await journal.claim(key("f"), "t", {})
        answers = await asyncio.gather(
            journal.finish(key("f"), {"text": "first"}),
            journal.finish(key("f"), {"text": "second"}),
            return_exceptions=True,
        )
        assert [answer(a) for a in answers] == ["None", "not owned"]
        entry = await journal.entry(key("f"))
        assert entry is not None and entry.outcome == {"text": "first"}


async def test_a_claim_and_letting_go_of_it_in_one_batch(journal_target: str) -> None:
    """SQLite wrote a batch's new rows at commit, after letting go of them: the call
    stayed running under an owner that no longer held it (busy to every other journal's
    claim while this one is open)."""
    async with (
        await open_journal(journal_target) as journal,
        await open_journal(journal_target) as other,
    ):
        answers = await asyncio.gather(
            journal.claim(key("a"), "t", {}),
            journal.abandon(key("a")),
            journal.claim(key("u"), "t", {}, queued=True),
            journal.unclaim(key("u")),
            return_exceptions=True,
        )
        assert [answer(a) for a in answers] == ["RUN", "None", "RUN", "None"]
        abandoned = await other.entry(key("a"))
        assert abandoned is not None and abandoned.state is CallState.INTERRUPTED
        requeued = await other.entry(key("u"))
        assert requeued is not None and requeued.state is CallState.QUEUED
        assert (await other.claim(key("a"), "t", {})).action is ClaimAction.INTERRUPTED
        assert (await other.claim(key("u"), "t", {})).action is ClaimAction.RUN


async def test_a_call_let_go_of_and_claimed_again_in_one_batch(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        await journal.claim(key("q"), "t", {}, queued=True)
        await journal.claim(key("f"), "t", {})
        answers = await asyncio.gather(
            journal.unclaim(key("q")),
            journal.claim(key("q"), "t", {}, queued=True),
            journal.finish(key("f"), {"text": "done"}),
            journal.claim(key("f"), "t", {}),
            return_exceptions=True,
        )
        assert [answer(a) for a in answers] == ["None", "RUN", "None", "REPLAY"]
        await journal.start(key("q"))  # the second claim owns it
        await journal.finish(key("q"), {"text": "ran"})
        entry = await journal.entry(key("q"))
        assert entry is not None and entry.outcome == {"text": "ran"} and entry.attempt == 1
