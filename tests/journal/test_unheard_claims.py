"""A claim whose caller is stopped just as its answer comes is undone as if it never was:
the row it inserted goes (the call never happened), and a queued call it took is queued
again (it still waits to run), on SQLite and on a real PostgreSQL server.

The window is the one between the writer setting the claim's answer and the caller's task
resuming: a task cancelled then never hears the answer, although it was set. A first claim
of the same batch cancels the second one's task as soon as it hears its own answer, which
lands exactly there (both answers are set together, the first resumes first).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import CallJournal, CallKey, CallState, ClaimAction, open_journal

LIMIT = 30.0  # only a real hang reaches it


def key(name: str) -> CallKey:
    return CallKey("s", name, "d" * 64)


async def claim_unheard(journal: CallJournal, first: CallKey, second: CallKey) -> None:
    """Claim `first` and `second` in one batch; the second's caller is cancelled as soon as
    the first's answer is heard, so the second's answer is set and never heard."""
    unheard: asyncio.Task[object] | None = None

    async def claim_first() -> None:
        claim = await journal.claim(first, "t", {})
        assert claim.action is ClaimAction.RUN
        assert unheard is not None
        assert not unheard.done()  # its answer is set, its task has not resumed yet
        unheard.cancel()

    heard = asyncio.ensure_future(claim_first())
    unheard = asyncio.ensure_future(journal.claim(second, "t", {}))
    await asyncio.wait_for(heard, LIMIT)
    await asyncio.wait([unheard], timeout=LIMIT)
    assert unheard.cancelled()
    await journal.counts()  # one operation more: the writer has undone the claim by then


async def test_an_unheard_claim_of_a_new_call_leaves_no_row(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        await claim_unheard(journal, key("a"), key("b"))
        assert await journal.entry(key("b")) is None  # never happened: not in the journal
        claim = await journal.claim(key("b"), "t", {})
        assert claim.action is ClaimAction.RUN and claim.entry.attempt == 1


async def test_an_unheard_claim_of_a_queued_call_queues_it_again(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        waiting = key("b")
        await journal.claim(waiting, "t", {}, queued=True)
        await journal.unclaim(waiting)  # queued, no owner: the next claim takes it
        await claim_unheard(journal, key("a"), waiting)
        entry = await journal.entry(waiting)
        assert entry is not None and entry.state is CallState.QUEUED  # still waits to run
        claim = await journal.claim(waiting, "t", {})  # nobody owns it: it runs, attempt 1
        assert claim.action is ClaimAction.RUN and claim.entry.attempt == 1


async def test_a_stop_at_any_point_leaves_no_claim_nobody_heard(journal_target: str) -> None:
    """Claims of new calls and of queued ones, their callers cancelled after 0, 1, 2, ...
    turns of the loop: a claim that was heard owns its call; one that was not left no row
    for a new call and the queued one queued, owned by nobody."""
    async with await open_journal(journal_target) as journal:
        turns = 0
        while True:
            new, waiting = (
                CallKey(f"s{turns}", "new", "d" * 64),
                CallKey(f"s{turns}", "q", "d" * 64),
            )
            await journal.claim(waiting, "t", {}, queued=True)
            await journal.unclaim(waiting)
            tasks = {k: asyncio.ensure_future(journal.claim(k, "t", {})) for k in (new, waiting)}
            for _ in range(turns):
                await asyncio.sleep(0)
            for task in tasks.values():
                task.cancel()
            await asyncio.wait(tasks.values(), timeout=LIMIT)
            await journal.counts()
            for k, task in tasks.items():
                entry = await journal.entry(k)
                again = await journal.claim(k, "t", {})
                if not task.cancelled():  # heard: this journal owns the call
                    assert entry is not None and entry.state is CallState.RUNNING, (turns, k)
                    assert again.action is ClaimAction.BUSY, (turns, k)
                    continue
                if k == new:
                    assert entry is None, (turns, entry)
                else:
                    assert entry is not None and entry.state is CallState.QUEUED, (turns, entry)
                assert again.action is ClaimAction.RUN and again.entry.attempt == 1, (turns, k)
            if not any(task.cancelled() for task in tasks.values()):
                break  # the claims were heard before the stop: every point was tried
            turns += 1
            assert turns < 1000, "the claims were never answered"


async def test_a_stopped_batch_leaves_no_queued_call_without_a_slot_limit(
    journal_target: str, tmp_path: Path
) -> None:
    """With no slot limit a call is claimed running and its tool starts at once: whenever
    the batch is stopped, a call left queued is one claimed and let go of before its tool
    started, free to run as attempt 1, never a claim nobody heard, kept (busy for ever)."""

    @tool(read_only=True, name="step")
    async def step(n: int) -> int:
        """Take a few turns of the loop."""
        for _ in range(3):
            await asyncio.sleep(0)
        return n

    policy = ExecutionPolicy(persist_results=False)
    calls = [ToolCallRequest(f"c{i}", "step", {"n": i}) for i in range(6)]
    async with await open_journal(journal_target) as journal:
        turns = 0
        while True:
            session = f"s{turns}"
            registry = ToolRegistry(
                [step], context=ToolContext(workspace=tmp_path, session=session)
            )
            run = asyncio.ensure_future(ToolExecutor(registry, policy, journal=journal).run(calls))
            for _ in range(turns):
                await asyncio.sleep(0)
            finished = run.done()
            run.cancel()
            await asyncio.wait([run], timeout=LIMIT)
            await journal.counts()
            for entry in await journal.entries(session=session):
                if entry.state is CallState.QUEUED:
                    assert entry.started_at is None, (turns, entry)
                    claim = await journal.claim(entry.key, entry.tool, entry.arguments)
                    assert claim.action is ClaimAction.RUN, (turns, entry, claim)
                    assert claim.entry.attempt == 1
                    await journal.unclaim(entry.key)
            if finished:
                break
            turns += 1
            assert turns < 1000, "the batch never finished"
