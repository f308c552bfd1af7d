"""Under `max_concurrency`, the journal says `running` of no more calls than the limit
lets run: with a limit of 6, a reader of the journal never counts 7 (found by the hostile
re-check of the independent journal checks, on PostgreSQL).

Each tool counts the journal's running rows from a connection of its own as its first
act, blocking the event loop while it reads: nothing else is written meanwhile, so the
count is what the journal said when that tool started, with no timing involved.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.journal.reading import read_one

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.execution.result_store import SAVED_METADATA_KEY
from toolbridge.journal import open_journal

LIMIT, CALLS = 6, 40
COUNT = "SELECT count(*) FROM toolbridge_calls WHERE state = 'running'"


def running_now(target: str) -> int:
    """The journal's running rows, read by another connection (a reader's view)."""
    return int(read_one(target, COUNT))


async def test_no_more_calls_are_running_than_the_limit_lets_run(
    journal_target: str, tmp_path: Path
) -> None:
    seen: list[int] = []

    @tool(concurrency_safe=True)
    async def count_running(n: int) -> int:
        """Count the calls the journal says are running, then answer."""
        seen.append(running_now(journal_target))  # blocks the loop: no write meanwhile
        return n

    async with await open_journal(journal_target) as journal:
        context = ToolContext(workspace=tmp_path, session="s")
        registry = ToolRegistry([count_running], context=context)
        policy = ExecutionPolicy(max_concurrency=LIMIT, persist_results=False, loop_guard=False)
        executor = ToolExecutor(registry, policy, journal=journal)
        calls = [ToolCallRequest(f"c{i}", "count_running", {"n": i}) for i in range(CALLS)]
        outcomes = await executor.run(calls)
    assert [outcome.result.text for outcome in outcomes] == [str(i) for i in range(CALLS)]
    assert len(seen) == CALLS
    assert max(seen) <= LIMIT, seen


LONG_CALLS = 12


def most_running_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of `spans` (started_at, finished_at) running at any call's start: a call
    finished at the moment another started no longer counts."""
    return max(sum(1 for s, f in spans if s <= start < f) for start, _ in spans)


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_long_result_keeps_its_slot_until_its_outcome_is_on_its_way(
    journal_target: str, tmp_path: Path, kind: str
) -> None:
    """A long result is saved (to the result store) after its tool returned; its slot is
    held until its outcome is submitted, so the call that takes the slot is recorded
    running after it finished. Before, the slot was freed before the save: the next call's
    start was stored while this one still read running (limit + 1 running at once).
    Shown by the journal's own times, which its writer takes in the order it applies
    operations: no timing involved. A sync tool (run in a worker thread, its start
    deferred until the thread takes it) goes the other way through the executor."""
    seen: list[int] = []

    @tool(concurrency_safe=True)
    async def long_text(n: int) -> str:
        """Count the calls the journal says are running, then answer at length."""
        seen.append(running_now(journal_target))  # blocks the loop: no write meanwhile
        return f"{n}:" + "x" * 500

    @tool(name="long_text", concurrency_safe=True)
    def long_text_in_a_thread(n: int) -> str:
        """Answer at length."""
        return f"{n}:" + "x" * 500

    async with await open_journal(journal_target) as journal:
        context = ToolContext(workspace=tmp_path, session="s")
        chosen = long_text if kind == "async" else long_text_in_a_thread
        registry = ToolRegistry([chosen], context=context)
        policy = ExecutionPolicy(
            max_concurrency=2,
            max_result_chars=100,
            preview_chars=20,
            results_dir=tmp_path / "results",
            loop_guard=False,
        )
        executor = ToolExecutor(registry, policy, journal=journal)
        calls = [ToolCallRequest(f"c{i}", "long_text", {"n": i}) for i in range(LONG_CALLS)]
        outcomes = await executor.run(calls)
        entries = await journal.entries(session="s")
    assert all(outcome.ok for outcome in outcomes)
    assert all(SAVED_METADATA_KEY in outcome.result.metadata for outcome in outcomes)
    spans = [(e.started_at, e.finished_at) for e in entries]
    assert len(spans) == LONG_CALLS
    assert all(s is not None and f is not None for s, f in spans)
    assert most_running_at_once(spans) <= 2, sorted(spans)  # type: ignore[arg-type]
    assert max(seen, default=0) <= 2, seen
