"""Stops that land on the path of calls claimed ahead (`CallPath._claim_ahead`): whatever
await a stop interrupts, a call whose tool never started is let go as the guide promises
(queued again, no owner: it runs as the same attempt when it is sent again), never left
claimed by a process that will not run it (which reads `interrupted` once that process is
gone, for a call that never ran)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.core.tool import Tool
from toolbridge.execution.call_path import CLAIMED_AT_ONCE
from toolbridge.execution.outcomes import Outcomes, OutcomeStatus
from toolbridge.journal import CallJournal, CallKey, CallState, open_journal


@tool(name="write_once", concurrency_safe=True)
async def write_once(n: int) -> int:
    """Runs beside others, but is neither read-only nor idempotent: a call read as
    interrupted is not run again by itself."""
    return n


def executor(journal: CallJournal, workspace: Path) -> ToolExecutor:
    registry = ToolRegistry([write_once], context=ToolContext(workspace=workspace, session="s"))
    return ToolExecutor(registry, ExecutionPolicy(persist_results=False), journal=journal)


def calls(count: int) -> list[ToolCallRequest]:
    return [ToolCallRequest(f"c{i}", "write_once", {"n": i}) for i in range(count)]


async def test_a_second_stop_while_unbegun_calls_are_let_go_still_lets_go_of_them_all(
    journal_target: str, workspace: Path
) -> None:
    # The first stop lands as the claims are answered (no task began); the second lands
    # while the first call is being let go. Every call's letting go was already under way
    # (as when each call's own task lets go of it): none is left claimed by this process.
    count = 5
    async with await open_journal(journal_target) as journal:
        run: asyncio.Future[Any] | None = None
        claim_many, unclaim = journal.claim_many, journal.unclaim
        letting_go: list[CallKey] = []

        async def stopped_as_answered(asked: Any) -> Any:
            answers = await claim_many(asked)
            assert run is not None
            run.cancel()  # lands at the run's next wait: before its tasks begin
            return answers

        async def stopped_again(key: CallKey) -> None:
            letting_go.append(key)
            if len(letting_go) == 1:
                assert run is not None
                run.cancel()  # the run waits for this letting go: stopped again
            await unclaim(key)

        journal.claim_many = stopped_as_answered  # type: ignore[method-assign]
        journal.unclaim = stopped_again  # type: ignore[method-assign]
        run = asyncio.ensure_future(executor(journal, workspace).run(calls(count)))
        await asyncio.wait([run], timeout=30)
        assert run.cancelled()
        journal.claim_many, journal.unclaim = claim_many, unclaim  # type: ignore[method-assign]
    # Closed: what it was still writing is written. As a new process would see it:
    async with await open_journal(journal_target) as journal:
        entries = await journal.entries(session="s")
        assert sorted((e.key.call_id, e.state, e.started_at) for e in entries) == [
            (f"c{i}", CallState.QUEUED, None) for i in range(count)
        ]
        outcomes = await executor(journal, workspace).run(calls(count))
    assert [outcome.value for outcome in outcomes] == list(range(count))


async def test_a_keyboard_interrupt_while_a_part_is_screened_stops_the_run_as_any_stop(
    journal_target: str, workspace: Path
) -> None:
    # Ctrl-C lands while the second part's calls are screened (here: in the approval rule,
    # as a SIGINT lands in whatever code runs). The run stops as `ToolExecutor.run` says:
    # every call has an outcome (those that did not run `cancelled`), and the first part,
    # claimed but never begun, is let go: queued again, to run when sent again.
    count = CLAIMED_AT_ONCE + 6

    def rule(called: Tool, arguments: Mapping[str, Any]) -> bool:
        if arguments["n"] == CLAIMED_AT_ONCE + 2:
            raise KeyboardInterrupt
        return False

    registry = ToolRegistry([write_once], context=ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False, approval=rule)
    out = Outcomes()
    async with await open_journal(journal_target) as journal:
        with pytest.raises(KeyboardInterrupt):
            await ToolExecutor(registry, policy, journal=journal).run(calls(count), into=out)
        assert [outcome.status for outcome in out] == [OutcomeStatus.CANCELLED] * count
        entries = await journal.entries(session="s")
    assert sorted((e.key.call_id, e.state, e.started_at) for e in entries) == sorted(
        (f"c{i}", CallState.QUEUED, None) for i in range(CLAIMED_AT_ONCE)
    )


async def test_a_backend_whose_claim_fails_on_one_call_fails_that_call_only(
    journal_target: str, workspace: Path
) -> None:
    # A backend of one's own with `CallJournal`'s default `claim_many` (a `claim` each),
    # whose `claim` has a bug met on one call: that call fails, as a bug met on one call
    # does (`ToolExecutor.run` raises only for a stop); the others run, and none is left
    # claimed by nobody.
    async with await open_journal(journal_target) as journal:
        claim = journal.claim

        async def one_fails(key: CallKey, *args: Any, **kwargs: Any) -> Any:
            if key.call_id == "c1":
                raise RuntimeError("a bug of the backend")
            return await claim(key, *args, **kwargs)

        async def claim_many(asked: Any) -> Any:
            return await CallJournal.claim_many(journal, asked)

        journal.claim = one_fails  # type: ignore[method-assign]
        journal.claim_many = claim_many  # type: ignore[method-assign]
        outcomes = await executor(journal, workspace).run(calls(3))
        assert [outcome.value for outcome in outcomes] == [0, None, 2]
        assert outcomes[1].error is not None
        entries = await journal.entries(session="s")
    assert sorted((e.key.call_id, e.state) for e in entries) == [
        ("c0", CallState.FINISHED),
        ("c2", CallState.FINISHED),
    ]


async def test_a_backend_whose_claim_many_fails_fails_those_calls_only(
    journal_target: str, workspace: Path
) -> None:
    # A `claim_many` of one's own with a bug: the calls it was asked about fail (none was
    # claimed), and the run goes on as a run whose calls failed: no exception but a stop.
    async with await open_journal(journal_target) as journal:

        async def broken(asked: Any) -> Any:
            raise RuntimeError("a bug of the backend")

        journal.claim_many = broken  # type: ignore[method-assign]
        outcomes = await executor(journal, workspace).run(calls(3))
    assert [outcome.error is not None for outcome in outcomes] == [True] * 3
    assert all("RuntimeError" in str(outcome.result.content) for outcome in outcomes)


async def test_a_stop_as_a_later_part_is_answered_leaves_each_part_as_it_was(
    journal_target: str, workspace: Path
) -> None:
    # The first part's tools run (each waits); the stop lands as the second part's claims
    # are answered: the first part's calls started (interrupted: they may have partly
    # run), the second part's never did (queued again, to run as the same attempt).
    count = CLAIMED_AT_ONCE + 3
    running: set[int] = set()
    all_running = asyncio.Event()

    @tool(name="held", concurrency_safe=True)
    async def held(n: int) -> int:
        """Waits until stopped, in the first part."""
        if n < CLAIMED_AT_ONCE:
            running.add(n)
            if len(running) == CLAIMED_AT_ONCE:
                all_running.set()
            await asyncio.Event().wait()
        return n

    registry = ToolRegistry([held], context=ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(persist_results=False)
    sent = [ToolCallRequest(f"c{i}", "held", {"n": i}) for i in range(count)]
    async with await open_journal(journal_target) as journal:
        claim_many = journal.claim_many
        run: asyncio.Future[Any] | None = None

        async def second_part_stops(asked: Any) -> Any:
            if len(asked) == CLAIMED_AT_ONCE:
                return await claim_many(asked)
            await all_running.wait()  # (the first part's tools run meanwhile)
            answers = await claim_many(asked)
            assert run is not None
            run.cancel()
            return answers

        journal.claim_many = second_part_stops  # type: ignore[method-assign]
        run = asyncio.ensure_future(ToolExecutor(registry, policy, journal=journal).run(sent))
        await asyncio.wait([run], timeout=30)
        assert run.cancelled()
        journal.claim_many = claim_many  # type: ignore[method-assign]
    async with await open_journal(journal_target) as journal:
        states = {e.key.call_id: e.state for e in await journal.entries(session="s")}
    assert states == {
        f"c{i}": CallState.INTERRUPTED if i < CLAIMED_AT_ONCE else CallState.QUEUED
        for i in range(count)
    }
