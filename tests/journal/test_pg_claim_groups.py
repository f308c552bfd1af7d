"""The PostgreSQL journal's batch of claims (`claim_many`) is one job of its writer, with one
answer for all its calls: each call still gets its own answer (a call that cannot be stored
fails alone, a key twice runs once), and a caller stopped before it hears the answer leaves
nothing behind, whatever point the stop comes at: each new call's row goes, and a queued
call it took is queued again, owned by nobody (as a single claim nobody heard,
tests/pg_journal/test_unheard_claims.py).
"""

from __future__ import annotations

import asyncio

import pytest

from toolbridge.journal import CallKey, CallState, ClaimAction, open_journal
from toolbridge.journal.postgres import PostgresJournal
from toolbridge.journal.records import Claim, ClaimRequest, JournalError

LIMIT = 30.0  # only a real hang reaches it


def request(key: CallKey, tool: str = "t") -> ClaimRequest:
    return ClaimRequest(key, tool, {"n": 1})


async def test_each_call_of_a_batch_gets_its_own_answer(pg_journal: PostgresJournal) -> None:
    done, busy = CallKey("s", "done", "h"), CallKey("s", "busy", "h")
    for key in (done, busy):
        assert (await pg_journal.claim(key, "t", {"n": 1})).action is ClaimAction.RUN
    await pg_journal.finish(done, {"text": "stored"})
    new, twice = CallKey("s", "new", "h"), CallKey("s", "twice", "h")
    answers = await pg_journal.claim_many(
        [
            request(new),
            request(done),
            request(busy),
            request(CallKey("s", "bad", "h"), "t\x00"),  # a tool name it cannot store
            request(twice),
            request(twice),
        ]
    )
    claims = [answer.action if isinstance(answer, Claim) else answer for answer in answers]
    assert claims[:3] == [ClaimAction.RUN, ClaimAction.REPLAY, ClaimAction.BUSY]
    assert isinstance(claims[3], JournalError)
    assert claims[4:] == [ClaimAction.RUN, ClaimAction.BUSY]  # the first of a key runs it
    for key in (new, twice):
        await pg_journal.finish(key, {"text": "ok"})  # owned: its outcome is stored


async def test_a_closed_journal_refuses_a_batch(postgres_url: str) -> None:
    pg_journal = await open_journal(postgres_url)
    await pg_journal.close()
    with pytest.raises(JournalError, match="closed"):
        await pg_journal.claim_many([request(CallKey("s", "late", "h"))])


async def queued_and_let_go(pg_journal: PostgresJournal, key: CallKey) -> None:
    """`key` stored queued with no owner: the next claim takes it."""
    await pg_journal.claim(key, "t", {"n": 1}, queued=True)
    await pg_journal.unclaim(key)


async def check_unheard(pg_journal: PostgresJournal, new: list[CallKey], waiting: CallKey) -> None:
    """The claims of `new` and `waiting` were not heard: as if they never were."""
    await pg_journal.counts()  # one operation more: the writer has undone the claims by then
    for key in new:
        assert await pg_journal.entry(key) is None, key
    entry = await pg_journal.entry(waiting)
    assert entry is not None and entry.state is CallState.QUEUED
    for key in [*new, waiting]:  # nobody owns them: each runs, first attempt
        claim = await pg_journal.claim(key, "t", {"n": 1})
        assert claim.action is ClaimAction.RUN and claim.entry.attempt == 1, key


async def test_a_batch_answered_but_not_heard_is_undone(pg_journal: PostgresJournal) -> None:
    """The batch's caller is cancelled as soon as another claim of the same writer batch
    hears its own answer: the batch's answer is set, never heard."""
    new = [CallKey("s", f"new{n}", "h") for n in range(3)]
    waiting = CallKey("s", "waiting", "h")
    await queued_and_let_go(pg_journal, waiting)
    unheard: asyncio.Task[object] | None = None

    async def claim_first() -> None:
        claim = await pg_journal.claim(CallKey("s", "first", "h"), "t", {})
        assert claim.action is ClaimAction.RUN
        assert unheard is not None
        assert not unheard.done()  # its answer is set, its task has not resumed yet
        unheard.cancel()

    heard = asyncio.ensure_future(claim_first())
    unheard = asyncio.ensure_future(pg_journal.claim_many([request(k) for k in [*new, waiting]]))
    await asyncio.wait_for(heard, LIMIT)
    await asyncio.wait([unheard], timeout=LIMIT)
    assert unheard.cancelled()
    await check_unheard(pg_journal, new, waiting)


async def test_a_batch_stopped_at_any_point_leaves_no_claim_nobody_heard(
    pg_journal: PostgresJournal,
) -> None:
    turns = 0
    while True:
        new = [CallKey(f"s{turns}", f"new{n}", "h") for n in range(3)]
        waiting = CallKey(f"s{turns}", "waiting", "h")
        await queued_and_let_go(pg_journal, waiting)
        task = asyncio.ensure_future(pg_journal.claim_many([request(k) for k in [*new, waiting]]))
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait([task], timeout=LIMIT)
        if not task.cancelled():  # heard: this pg_journal owns every call
            answers = task.result()
            assert all(
                isinstance(answer, Claim) and answer.action is ClaimAction.RUN for answer in answers
            )
            break
        await check_unheard(pg_journal, new, waiting)
        turns += 1
        assert turns < 1000, "the claims were never answered"
