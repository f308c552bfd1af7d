"""Stopping a run whose PostgreSQL journal server does not answer (the backend process of
the journal's connection stopped with SIGSTOP: a real server, hung) ends: the executor
waits for the journal's answer to the stop's writes no longer than the journal's
`close_limit`, one bound for the whole stop however many waits it passes through (its
calls let go of at once, then a together-run's outcomes on their way), says at error what
it left, and the stop (a `CancelledError`) goes on. The calls' rows stay as the next claim
reads them: the call that started is interrupted (a read-only call: run again, as a new
attempt), the call still queued for its slot runs again as the same attempt; an outcome
sent before the stop is stored once the server goes on.

No timing is asserted: the stop must end at all (a generous bound against a hang) while
the server is still stopped, and the log says which waits ran out, for which calls, and
that a later wait had nothing left of the bound."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.journal.waiting import until

from toolbridge import (
    ExecutionPolicy,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.journal import CallKey, CallState, JournalEntry, open_journal
from toolbridge.journal.postgres import PostgresJournal

GUARD = 60.0  # only a real hang reaches it


@contextmanager
def hung(journal: PostgresJournal) -> Iterator[None]:
    """The backend process of the journal's connection stopped (SIGSTOP) inside."""
    backend = journal._conn.info.backend_pid
    os.kill(backend, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(backend, signal.SIGCONT)


async def stop(run: asyncio.Future[Any]) -> None:
    """Cancel `run`: it ends cancelled (a `CancelledError`), whatever the journal does."""
    run.cancel()
    await asyncio.wait([run], timeout=GUARD)  # a bound against a hang only
    assert run.cancelled(), "the stop waited for the hung journal server"


def left_calls(caplog: pytest.LogCaptureFixture) -> str:
    """What the stop logged it left to the journal."""
    return "".join(
        r.getMessage() for r in caplog.records if "did not answer within" in r.getMessage()
    )


async def test_a_stop_ends_while_the_journal_server_does_not_answer(
    postgres_url: str, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    began = asyncio.Event()
    ran: list[int] = []

    @tool(read_only=True)  # run together, each waiting for the one slot
    async def step(n: int) -> str:
        """The first call of the first run holds its slot until stopped."""
        ran.append(n)
        if n == 0 and not began.is_set():
            began.set()
            await asyncio.Event().wait()
        return f"done {n}"

    registry = ToolRegistry([step], context=ToolContext(workspace=workspace, session="s"))
    policy = ExecutionPolicy(max_concurrency=1, persist_results=False)
    calls = [ToolCallRequest(f"c{n}", "step", {"n": n}) for n in range(2)]
    journal = await open_journal(postgres_url)
    assert isinstance(journal, PostgresJournal)
    journal.close_limit = 0.5
    run = asyncio.ensure_future(ToolExecutor(registry, policy, journal=journal).run(calls))
    try:
        await asyncio.wait_for(began.wait(), GUARD)
        async with await open_journal(postgres_url) as reader:  # c1 claimed, waits for the slot
            end = asyncio.get_running_loop().time() + GUARD
            while len(await reader.entries(session="s")) < 2:
                assert asyncio.get_running_loop().time() < end, "c1 was never claimed"
                await asyncio.sleep(0.02)
        with caplog.at_level(logging.ERROR, "toolbridge"), hung(journal):
            await stop(run)
    finally:
        run.cancel()
        await asyncio.wait([run], timeout=GUARD)  # (after a hang: once the server goes on)
        await journal.close()  # the server goes on: what the stop left is applied now
    assert "'c0'" in left_calls(caplog) and "'c1'" in left_calls(caplog), caplog.text
    async with await open_journal(postgres_url) as reader:
        entries = {entry.key.call_id: entry for entry in await reader.entries(session="s")}
        assert {name: entry.state for name, entry in entries.items()} == {
            "c0": CallState.INTERRUPTED,
            "c1": CallState.QUEUED,
        }
        again = await asyncio.wait_for(
            ToolExecutor(registry, policy, journal=reader).run(calls), GUARD
        )
        attempts = {entry.key.call_id: entry.attempt for entry in await reader.entries(session="s")}
    assert [outcome.result.text for outcome in again] == ["done 0", "done 1"]
    assert attempts == {"c0": 2, "c1": 1}  # c0 ran again (read-only); c1 had never started
    assert ran[0] == 0 and sorted(ran[1:]) == [0, 1]  # c1 never ran in the stopped run


class Watched(PostgresJournal):
    """A real PostgreSQL journal that notes the writes handed to it (`handed`: the write
    and its call id), and holds each `restart` until `restarts` is set."""

    handed: list[tuple[str, str]]
    restarts: asyncio.Event

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        self.handed.append(("finish", key.call_id))
        return super().finish_soon(key, outcome, error_kind=error_kind)

    async def start(self, key: CallKey) -> None:
        self.handed.append(("start", key.call_id))
        await super().start(key)

    async def restart(self, key: CallKey, *, queued: bool = False) -> JournalEntry:
        self.handed.append(("restart", key.call_id))
        await self.restarts.wait()
        return await super().restart(key, queued=queued)


@pytest.fixture
async def journal(postgres_url: str) -> AsyncIterator[Watched]:
    opened = await Watched.connect(postgres_url)
    opened.handed, opened.restarts = [], asyncio.Event()
    opened.close_limit = 0.5
    yield opened
    await opened.close()  # (closed already by a test that stopped the server)


class Steps:
    """A read-only tool, `step` (its calls run together): c0 runs until stopped the first
    time, any other call returns once `go` is set; `entered`: the calls that began."""

    def __init__(self, workspace: Path) -> None:
        self.entered: set[int] = set()
        self.go = asyncio.Event()

        @tool(read_only=True)
        async def step(n: int) -> str:
            """c0 runs until stopped (the first time); the others return once told to."""
            first = n not in self.entered
            self.entered.add(n)
            if first:
                await (self.go.wait() if n else asyncio.Event().wait())
            return f"done {n}"

        self.registry = ToolRegistry([step], context=ToolContext(workspace=workspace, session="s"))


@pytest.fixture
def steps(workspace: Path) -> Steps:
    return Steps(workspace)


def calls(*numbers: int) -> list[ToolCallRequest]:
    return [ToolCallRequest(f"c{n}", "step", {"n": n}) for n in numbers]


def one_bound(caplog: pytest.LogCaptureFixture, first: set[str], later: str) -> None:
    """The stop's waits had one `close_limit` (0.5 s) between them: those for the calls
    `first`, run at once, ran out of it (the first of them started it, with the whole
    bound); the later wait, for the outcome of `later`, had nothing left of it. Each wait
    said the calls it left."""
    records = [r.getMessage() for r in caplog.records if "did not answer within" in r.getMessage()]
    named = {call: [r for r in records if f"'{call}'" in r] for call in [*first, later]}
    assert all(len(found) == 1 for found in named.values()), caplog.text
    assert len(records) == len({r for found in named.values() for r in found}), caplog.text
    assert sum("within 0.5 s " in r for r in records) == 1, caplog.text  # the first wait
    assert "within the 0.00 s left of this stop's 0.5 s" in named[later][0], caplog.text


async def states(postgres_url: str) -> dict[str, CallState]:
    async with await open_journal(postgres_url) as reader:
        return {entry.key.call_id: entry.state for entry in await reader.entries(session="s")}


async def stop_while_hung(
    journal: Watched,
    run: asyncio.Future[Any],
    steps: Steps,
    caplog: pytest.LogCaptureFixture,
    *,
    ready: Callable[[], bool],
    sent: set[tuple[str, str]],
) -> None:
    """Once `ready()`, hang the server and let the calls go on (`steps.go`, and a `restart`
    held); once the writes `sent` are handed to the journal, stop `run`: it ends while the
    server is still stopped. Then the server goes on, and the journal closes (what the
    stop left is applied now)."""
    try:
        await until(ready, "the calls did not begin")
        with caplog.at_level(logging.ERROR, "toolbridge"), hung(journal):
            journal.restarts.set()
            steps.go.set()
            await until(lambda: sent <= set(journal.handed), f"only {journal.handed} sent")
            await stop(run)
    finally:
        run.cancel()
        await asyncio.wait([run], timeout=GUARD)  # (after a hang: once the server goes on)
        await journal.close()


async def test_a_stop_ends_while_an_outcome_waits_for_the_hung_server(
    postgres_url: str, journal: Watched, steps: Steps, caplog: pytest.LogCaptureFixture
) -> None:
    # Calls run together: c1's outcome is on its way into the journal (sent, unanswered)
    # while c0 still runs. The stop lets go of c0 first, then waits for c1's outcome:
    # both waits together take one bound.
    executor = ToolExecutor(steps.registry, journal=journal)
    run = asyncio.ensure_future(executor.run(calls(0, 1)))
    await stop_while_hung(
        journal, run, steps, caplog, ready=lambda: steps.entered == {0, 1}, sent={("finish", "c1")}
    )
    one_bound(caplog, {"c0"}, "c1")
    assert await states(postgres_url) == {
        "c0": CallState.INTERRUPTED,
        "c1": CallState.FINISHED,  # sent before the stop: applied once the server went on
    }


async def test_a_stop_letting_go_of_a_running_and_a_queued_call_then_an_outcome_takes_one_bound(
    postgres_url: str, journal: Watched, steps: Steps, caplog: pytest.LogCaptureFixture
) -> None:
    # Two slots: c0 runs until stopped, c1 returns once told, c2 waits for a slot. With
    # the server hung, c1 returns: its outcome is sent, and c2's start as c1's slot frees.
    # The stop lets go of c0 and c2 at once, then waits for c1's outcome.
    policy = ExecutionPolicy(max_concurrency=2, persist_results=False)
    executor = ToolExecutor(steps.registry, policy, journal=journal)
    run = asyncio.ensure_future(executor.run(calls(0, 1, 2)))
    sent = {("finish", "c1"), ("start", "c2")}
    await stop_while_hung(
        journal, run, steps, caplog, ready=lambda: steps.entered == {0, 1}, sent=sent
    )
    one_bound(caplog, {"c0", "c2"}, "c1")
    assert await states(postgres_url) == {
        "c0": CallState.INTERRUPTED,
        "c1": CallState.FINISHED,
        "c2": CallState.QUEUED,  # its start was let go of: it never ran
    }


async def test_a_stop_letting_go_of_a_call_taken_over_then_an_outcome_takes_one_bound(
    postgres_url: str, journal: Watched, steps: Steps, caplog: pytest.LogCaptureFixture
) -> None:
    # c0 was interrupted by a first run; the second run takes it over (read-only: run
    # again) while the server hangs, beside c1, whose outcome is then sent. The stop lets
    # go of c0's claim, then waits for c1's outcome.
    executor = ToolExecutor(steps.registry, journal=journal)
    first = asyncio.ensure_future(executor.run(calls(0)))
    await until(lambda: steps.entered == {0}, "c0 never started")
    await stop(first)  # the server answers: c0 is interrupted
    run = asyncio.ensure_future(executor.run(calls(0, 1)))
    await stop_while_hung(
        journal,
        run,
        steps,
        caplog,
        ready=lambda: ("restart", "c0") in journal.handed and 1 in steps.entered,
        sent={("finish", "c1")},
    )
    one_bound(caplog, {"c0"}, "c1")
    assert await states(postgres_url) == {"c0": CallState.INTERRUPTED, "c1": CallState.FINISHED}
