"""Stopping a run whose PostgreSQL journal server does not answer (the backend process of
the journal's connection stopped with SIGSTOP: a real server, hung) ends: the executor
waits for the journal's answer to the stop's writes no longer than the journal's
`close_limit`, says at error what it left, and the stop (a `CancelledError`) goes on. The
calls' rows stay as the next claim reads them: the call that started is interrupted (a
read-only call: run again, as a new attempt), the call still queued for its slot runs
again as the same attempt; an outcome sent before the stop is stored once the server
goes on.

No timing is asserted: the stop must end at all (a generous bound against a hang)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
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
from toolbridge.journal import CallKey, CallState, open_journal
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
    """A real PostgreSQL journal that says when an outcome is handed to it."""

    handed: asyncio.Event

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        self.handed.set()
        return super().finish_soon(key, outcome, error_kind=error_kind)


async def test_a_stop_ends_while_an_outcome_waits_for_the_hung_server(
    postgres_url: str, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Calls run together: c1's outcome is on its way into the journal (sent, unanswered)
    # while c0 still runs; the stop waits for neither past the bound.
    entered: set[int] = set()
    go = asyncio.Event()

    @tool(read_only=True)
    async def step(n: int) -> str:
        """c0 runs until stopped (the first time); c1 returns once told to."""
        first = n not in entered
        entered.add(n)
        if first:
            await (go.wait() if n else asyncio.Event().wait())
        return f"done {n}"

    registry = ToolRegistry([step], context=ToolContext(workspace=workspace, session="s"))
    calls = [ToolCallRequest(f"c{n}", "step", {"n": n}) for n in range(2)]
    journal = await Watched.connect(postgres_url)
    journal.handed = asyncio.Event()
    journal.close_limit = 0.5
    run = asyncio.ensure_future(ToolExecutor(registry, journal=journal).run(calls))
    try:
        end = asyncio.get_running_loop().time() + GUARD
        while len(entered) < 2:  # both claimed, both running
            assert asyncio.get_running_loop().time() < end, f"only {entered} started"
            await asyncio.sleep(0.02)
        with caplog.at_level(logging.ERROR, "toolbridge"), hung(journal):
            go.set()
            await asyncio.wait_for(journal.handed.wait(), GUARD)
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
            "c1": CallState.FINISHED,  # sent before the stop: applied once the server went on
        }
