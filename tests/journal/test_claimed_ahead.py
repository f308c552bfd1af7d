"""The calls of a together-run are screened and claimed before their tasks start, a part
of `CLAIMED_AT_ONCE` in one request (`CallJournal.claim_many`), on SQLite and on a real
PostgreSQL server: the journal sees a few requests, not a claim per call, and a run stopped
between the answers and its tasks leaves its calls as the journal says of a stopped call
that never started (queued again, no owner), and a call taken over as interrupted so."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
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
from toolbridge.core.errors import ToolError
from toolbridge.execution.approval import arguments_digest
from toolbridge.execution.call_path import CLAIMED_AT_ONCE
from toolbridge.journal import (
    CallJournal,
    CallKey,
    CallState,
    Claim,
    ClaimRequest,
    JournalError,
    open_journal,
)


@tool(read_only=True, name="echo")
async def echo(n: int) -> int:
    """Answer with `n`."""
    return n


@tool(name="write_once", concurrency_safe=True)
async def write_once(n: int) -> int:
    """Runs beside others, but is neither read-only nor idempotent: an interrupted call is
    not run again by itself."""
    return n


def executor(journal: CallJournal, workspace: Path, session: str = "s") -> ToolExecutor:
    registry = ToolRegistry(
        [echo, write_once], context=ToolContext(workspace=workspace, session=session)
    )
    return ToolExecutor(registry, ExecutionPolicy(persist_results=False), journal=journal)


def calls(count: int, name: str = "echo") -> list[ToolCallRequest]:
    return [ToolCallRequest(f"c{i}", name, {"n": i}) for i in range(count)]


class Spy:
    """Wraps a journal's `claim_many` (the real one runs) and its `claim`: what each was
    asked; `stop_after` cancels the run as the answers come back."""

    def __init__(self, journal: CallJournal, *, stop_after: bool = False) -> None:
        self.sizes: list[int] = []
        self.single: list[CallKey] = []
        claim_many, claim = journal.claim_many, journal.claim

        async def spied_many(asked: Sequence[ClaimRequest]) -> list[Claim | JournalError]:
            self.sizes.append(len(asked))
            answers = await claim_many(asked)
            if stop_after:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()  # lands at the run's next wait: before its tasks begin
            return answers

        async def spied(key: CallKey, *args: Any, **kwargs: Any) -> Claim:
            self.single.append(key)
            return await claim(key, *args, **kwargs)

        journal.claim_many = spied_many  # type: ignore[method-assign]
        journal.claim = spied  # type: ignore[method-assign]


async def test_a_together_run_is_claimed_a_part_at_a_time(
    journal_target: str, workspace: Path
) -> None:
    count = 2 * CLAIMED_AT_ONCE + 7
    async with await open_journal(journal_target) as journal:
        spy = Spy(journal)
        outcomes = await executor(journal, workspace).run(calls(count))
        assert [outcome.value for outcome in outcomes] == list(range(count))
        assert spy.sizes == [CLAIMED_AT_ONCE, CLAIMED_AT_ONCE, 7]
        assert spy.single == []  # no call claimed on its own
        entries = await journal.entries(session="s")
    assert len(entries) == count
    assert {(entry.state, entry.attempt) for entry in entries} == {(CallState.FINISHED, 1)}


async def test_a_run_stopped_as_its_claims_are_answered_leaves_them_to_run_again(
    journal_target: str, workspace: Path
) -> None:
    async with await open_journal(journal_target) as journal:
        Spy(journal, stop_after=True)
        run = asyncio.ensure_future(executor(journal, workspace).run(calls(5)))
        await asyncio.wait([run], timeout=30)
        assert run.cancelled()
        entries = await journal.entries(session="s")
        # Claimed running, stopped before any tool started: queued again, with no start.
        assert [(e.key.call_id, e.state, e.started_at) for e in entries] == [
            (f"c{i}", CallState.QUEUED, None) for i in range(5)
        ]
    async with await open_journal(journal_target) as journal:  # as a new process would
        outcomes = await executor(journal, workspace).run(calls(5))
        assert [outcome.value for outcome in outcomes] == list(range(5))
        assert all(outcome.result.metadata == {} for outcome in outcomes)  # none replayed
        entries = await journal.entries(session="s")
    assert {(entry.state, entry.attempt) for entry in entries} == {(CallState.FINISHED, 1)}


async def test_a_call_taken_over_as_interrupted_stays_so_when_the_run_stops_first(
    journal_target: str, workspace: Path
) -> None:
    key = CallKey("s", "c0", arguments_digest("write_once", {"n": 0}))
    async with await open_journal(journal_target) as crashed:
        await crashed.claim(key, "write_once", {"n": 0})  # started, then its process "died"
    async with await open_journal(journal_target) as journal:
        Spy(journal, stop_after=True)
        run = asyncio.ensure_future(executor(journal, workspace).run(calls(3, "write_once")))
        await asyncio.wait([run], timeout=30)
        assert run.cancelled()
        states = {e.key.call_id: e.state for e in await journal.entries(session="s")}
    # c0 may have partly run: still interrupted (not queued, not run); the others never ran.
    assert states == {"c0": CallState.INTERRUPTED, "c1": CallState.QUEUED, "c2": CallState.QUEUED}
    async with await open_journal(journal_target) as journal:
        outcomes = await executor(journal, workspace).run(calls(3, "write_once"))
    assert outcomes[0].error is not None and outcomes[0].error.kind.value == "interrupted"
    assert [outcome.value for outcome in outcomes[1:]] == [1, 2]


@pytest.mark.parametrize("together", [True, False])
async def test_plain_arguments_are_stored_as_their_canonical_text(
    journal_target: str, workspace: Path, together: bool
) -> None:
    # Plain JSON data is encoded once, for the digest and the record (keys sorted), whether
    # the calls are claimed together or one at a time.
    @tool(read_only=True, concurrency_safe=together, name="take")
    async def take(value: Any = None, b: int = 0, a: int = 0) -> str:
        """Take anything."""
        return "ok"

    registry = ToolRegistry([take], context=ToolContext(workspace=workspace, session="s"))
    arguments = {"b": 2, "a": 1, "value": ["é", {"z": None, "y": 1.5}]}
    sent = [ToolCallRequest(f"c{i}", "take", arguments) for i in range(2)]
    async with await open_journal(journal_target) as journal:
        policy = ExecutionPolicy(persist_results=False)
        outcomes = await ToolExecutor(registry, policy, journal=journal).run(sent)
        assert [outcome.ok for outcome in outcomes] == [True, True]
        entries = await journal.entries(session="s")
    for entry in entries:
        assert entry.arguments == {"a": 1, "b": 2, "value": ["é", {"y": 1.5, "z": None}]}
        assert list(entry.arguments) == ["a", "b", "value"]
        assert entry.key.args_hash == arguments_digest("take", arguments)


async def test_arguments_that_are_not_plain_data_are_stored_the_journals_way(
    journal_target: str,
) -> None:
    # What plain JSON has no form for (a program's own values: the executor's validation
    # refuses NaN from a model) is written as a claim alone writes it: NaN by name.
    from toolbridge.journal.recorder import CallRecorder, CallToBegin, Recording

    values: list[Any] = [math.nan, "a\ud800b", [-math.inf]]
    async with await open_journal(journal_target) as journal:
        recorder = CallRecorder(journal, "s")
        begun = await recorder.begin_many(
            [CallToBegin(f"c{i}", echo, {"value": value}) for i, value in enumerate(values)]
        )
        stored = {e.key.call_id: e for e in await journal.entries(session="s")}
    assert isinstance(begun[0], Recording) and isinstance(begun[2], Recording)
    assert stored["c0"].arguments == {"value": "NaN"}
    assert stored["c2"].arguments == {"value": ["-Infinity"]}
    for i in (0, 2):
        assert stored[f"c{i}"].key.args_hash == arguments_digest("echo", {"value": values[i]})
    # Text that is not Unicode has no digest: that call alone is not run, nor stored.
    assert isinstance(begun[1], ToolError) and "cannot record it" in begun[1].message
    assert "c1" not in stored


@pytest.mark.parametrize("count", [1, 3])
async def test_a_redactor_still_decides_what_is_stored(
    journal_target: str, workspace: Path, count: int
) -> None:
    from toolbridge.journal.recorder import CallRecorder

    def redact(name: str, arguments: Any) -> Any:
        return {"n": "<hidden>"}

    async with await open_journal(journal_target) as journal:
        recorder = CallRecorder(journal, "s", redact=redact)
        registry = ToolRegistry([echo], context=ToolContext(workspace=workspace, session="s"))
        run = ToolExecutor(registry, ExecutionPolicy(persist_results=False), journal=recorder)
        outcomes = await run.run(calls(count))
        assert [outcome.value for outcome in outcomes] == list(range(count))
        entries = await journal.entries(session="s")
    assert [entry.arguments for entry in entries] == [{"n": "<hidden>"}] * count
    assert entries[0].key.args_hash == arguments_digest("echo", {"n": 0})
