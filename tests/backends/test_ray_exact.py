"""The Ray backend keeps the local backend's promises exactly: a run stopped between a
call's running mark and its worker's go leaves the call queued (its tool never started),
on SQLite and on a real PostgreSQL server;
the journal's time to record a start is not the call's; `call_started` comes when the
tool starts, so both backends give each call the same events; a worker's second outcome
for a call is ignored; a call id that is not text reads the same on both backends."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ExecutionPolicy, ToolCallRequest, ToolContext, ToolExecutor
from toolbridge.backends import ExecutionBackend, LocalBackend
from toolbridge.backends.ray import RayBackend, ToolSource
from toolbridge.execution.outcomes import ToolEvent
from toolbridge.journal import CallJournal, CallKey, CallState, JournalError, SQLiteJournal
from toolbridge.journal.postgres import PostgresJournal

SOURCE = ToolSource("exact_tools:build")
WAIT = 30.0  # seconds before an awaited effect counts as never coming (a hang guard)
DATABASES = itertools.count()


@pytest.fixture(scope="module")
def ray_backend(ray_runtime: None) -> Iterator[RayBackend]:
    backend = RayBackend(SOURCE, workers=2, grace=WAIT)
    backend.start()  # a call's limit counts its wait for a worker: no cold start in it
    yield backend
    backend.close()


def executor_for(
    workspace: Path,
    backend: ExecutionBackend,
    *,
    session: str = "s",
    max_concurrency: int | None = None,
    journal: CallJournal | None = None,
    events: list[ToolEvent] | None = None,
) -> ToolExecutor:
    registry = SOURCE.registry(ToolContext(workspace=workspace, session=session))
    policy = ExecutionPolicy(
        persist_results=False, loop_guard=False, max_concurrency=max_concurrency
    )
    listeners = [events.append] if events is not None else []
    return ToolExecutor(registry, policy, backend=backend, journal=journal, listeners=listeners)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def until(check: Any, what: str) -> None:
    """Wait until `check()` holds (an effect a worker writes, later)."""
    end = asyncio.get_running_loop().time() + WAIT
    while not check():
        assert asyncio.get_running_loop().time() < end, f"never happened: {what}"
        await asyncio.sleep(0.02)


class StopsAtStart(CallJournal):
    """A real journal that cancels `run` once it has stored the `nth` running mark, after
    `turns` more turns of the event loop: the run stops wherever that lands, between the
    mark and the worker's go included."""

    run: asyncio.Future[Any] | None = None
    nth = 1
    turns = 0

    async def start(self, key: CallKey) -> None:
        await super().start(key)
        self.nth -= 1
        if self.nth == 0 and self.run is not None:
            loop = asyncio.get_running_loop()
            run, turns = self.run, self.turns

            def later(left: int) -> None:
                if left:
                    loop.call_soon(later, left - 1)
                else:
                    run.cancel()

            later(turns)


class SQLiteStopsAtStart(StopsAtStart, SQLiteJournal):
    pass


class PostgresStopsAtStart(StopsAtStart, PostgresJournal):
    pass


@pytest.fixture(scope="module")
def postgres_cluster() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (as the journal tests start one)."""
    from tests.journal.conftest import throwaway_cluster

    with throwaway_cluster() as conninfo:
        yield conninfo


@pytest.fixture(params=["sqlite", "postgres"])
def journal_target(request: pytest.FixtureRequest, workspace: Path) -> str:
    """Where a journal lives: a SQLite file, or a fresh database on a real PostgreSQL."""
    if request.param == "sqlite":
        return str(workspace / "journal.sqlite3")
    import psycopg

    server = request.getfixturevalue("postgres_cluster")
    name = f"ray_{os.getpid()}_{next(DATABASES)}"
    with psycopg.connect(f"{server} dbname=postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = dict(part.split("=", 1) for part in server.split())
    return f"postgresql://{parts['user']}@/{name}?host={parts['host']}&port={parts['port']}"


async def stopping_journal(target: str) -> StopsAtStart:
    if target.startswith("postgresql://"):
        return await PostgresStopsAtStart.connect(target)
    return SQLiteStopsAtStart(target)


async def test_a_run_stopped_between_the_running_mark_and_the_go_leaves_the_call_queued(
    workspace: Path, ray_backend: RayBackend, journal_target: str
) -> None:
    batch = [ToolCallRequest("a", "effect", {"label": "a"})]
    async with await stopping_journal(journal_target) as journal:
        executor = executor_for(workspace, ray_backend, journal=journal)
        run = asyncio.ensure_future(executor.run(batch))
        journal.run = run  # cancelled as soon as "a" is marked running, before its go
        await asyncio.wait([run], timeout=WAIT)
        assert run.cancelled()
        [entry] = await journal.entries(session="s")
        # Its tool never started: queued again with no owner, not "interrupted".
        assert entry.state is CallState.QUEUED, entry
        [outcome] = await asyncio.wait_for(
            executor_for(workspace, ray_backend, journal=journal).run(batch), WAIT
        )
        [entry] = await journal.entries(session="s")
    assert outcome.ok, outcome.result.text  # ran without asking anyone
    assert (entry.state, entry.attempt) == (CallState.FINISHED, 1)
    assert lines_of(workspace / "effects.txt") == ["a"]  # once: the stopped run never ran it


@pytest.mark.parametrize("nth", [1, 2, 4])
async def test_a_stop_at_any_point_of_the_starts_leaves_no_started_call_queued(
    workspace: Path, ray_backend: RayBackend, nth: int, journal_target: str
) -> None:
    """Stopped after the nth running mark and 0, 1, 2, ... more turns of the loop: a call
    left queued never ran (and runs on the next claim as attempt 1); a call that may have
    started is interrupted, never queued; no call runs twice."""
    async with await stopping_journal(journal_target) as journal:
        for turns in range(8):
            session = f"s{turns}"
            labels = [f"{turns}-{i}" for i in range(4)]
            calls = [ToolCallRequest(f"c{i}", "effect", {"label": labels[i]}) for i in range(4)]
            journal.nth, journal.turns = nth, turns
            executor = executor_for(workspace, ray_backend, session=session, journal=journal)
            run = journal.run = asyncio.ensure_future(executor.run(calls))
            await asyncio.wait([run], timeout=WAIT)
            assert run.done()
            journal.run = None
            await journal.counts()  # the writer catches up with what the stop let go of
            states = {e.key.call_id: e.state for e in await journal.entries(session=session)}
            effects = lines_of(workspace / "effects.txt")
            for call in calls:
                if states.get(call.id) is CallState.QUEUED:
                    assert call.arguments["label"] not in effects, (turns, states)
            again = executor_for(workspace, ray_backend, session=session, journal=journal)
            outcomes = await asyncio.wait_for(again.run(calls), WAIT)
            entries = {e.key.call_id: e for e in await journal.entries(session=session)}
            for call, outcome in zip(calls, outcomes, strict=True):
                if states.get(call.id) in (None, CallState.QUEUED):
                    assert outcome.ok, (turns, states, outcome.result.text)
                    assert entries[call.id].attempt == 1
        effects = lines_of(workspace / "effects.txt")
        assert len(effects) == len(set(effects))  # no call ran twice


class SlowToStart(SQLiteJournal):
    """A real SQLite journal on a slow disk: recording a start takes longer than the
    `quick` tool's whole limit (3 s)."""

    async def start(self, key: CallKey) -> None:
        await asyncio.sleep(4.0)
        await super().start(key)


async def test_the_journals_time_to_record_a_start_is_not_the_calls(
    workspace: Path, ray_runtime: None
) -> None:
    # grace 1 s: the caller's own clock would end the call too, had it counted the write
    backend = RayBackend(SOURCE, workers=1, grace=1.0)
    texts = {}
    try:
        backend.start()
        for name, where, limit in (("local", LocalBackend(), 1), ("ray", backend, None)):
            async with SlowToStart(workspace / f"{name}.sqlite3") as journal:
                executor = executor_for(workspace, where, max_concurrency=limit, journal=journal)
                [outcome] = await asyncio.wait_for(
                    executor.run([ToolCallRequest("q", "quick", {"label": name})]), WAIT
                )
            texts[name] = outcome.result.text
    finally:
        backend.close()
    assert texts == {"local": "local in time", "ray": "ray in time"}


def types_per_call(events: list[ToolEvent]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for event in events:
        found.setdefault(str(event.call.id), []).append(str(event.type))
    return found


@pytest.mark.parametrize("journaled", [False, True])
async def test_each_call_has_the_same_events_on_both_backends(
    workspace: Path, ray_backend: RayBackend, journaled: bool
) -> None:
    batch = [
        ToolCallRequest("steps", "steps", {"count": 3}),
        ToolCallRequest("effect", "effect", {"label": "e"}),
        ToolCallRequest("quick", "quick", {"label": "q"}),
        ToolCallRequest("invalid", "steps", {"count": "three"}),
        ToolCallRequest("unknown", "stepz", {}),
        ToolCallRequest("more", "steps", {"count": 2}),
    ]
    seen = {}
    for name, backend in (("local", LocalBackend()), ("ray", ray_backend)):
        events: list[ToolEvent] = []
        async with SQLiteJournal(workspace / f"{name}.sqlite3") as journal:
            executor = executor_for(
                workspace, backend, session=name, journal=journal if journaled else None,
                events=events,
            )  # fmt: skip
            outcomes = await asyncio.wait_for(executor.run(batch), WAIT)
        assert [o.status for o in outcomes] == ["ok", "ok", "ok", "error", "error", "ok"]
        seen[name] = types_per_call(events)
    assert seen["local"]["steps"] == ["call_started", *["call_progress"] * 3, "call_finished"]
    assert seen["local"]["invalid"] == ["call_finished"]
    assert seen["ray"] == seen["local"]


@pytest.mark.parametrize("journaled", [False, True])
async def test_a_call_waiting_for_a_slot_has_not_started_on_either_backend(
    workspace: Path, ray_runtime: None, journaled: bool
) -> None:
    """ "a" holds the only slot (the executor's locally, the worker's on Ray) and "b" waits
    for it when the run is stopped: neither backend says "b" started."""
    backend = RayBackend(SOURCE, workers=1, max_calls_per_worker=1, grace=WAIT)
    seen = {}
    try:
        backend.start()
        for name, where, limit in (("local", LocalBackend(), 1), ("ray", backend, None)):
            events: list[ToolEvent] = []
            batch = [
                ToolCallRequest("a", "hold", {"label": name}),
                ToolCallRequest("b", "effect", {"label": name}),
            ]
            async with SQLiteJournal(workspace / f"{name}.sqlite3") as journal:
                executor = executor_for(
                    workspace, where, session=name, max_concurrency=limit,
                    journal=journal if journaled else None, events=events,
                )  # fmt: skip
                run = asyncio.ensure_future(executor.run(batch))
                await until(
                    lambda label=name: label in lines_of(workspace / "started.txt"),
                    f"{name}: a started",
                )
                run.cancel()
                await asyncio.wait([run], timeout=WAIT)
                if journaled:
                    states = {e.key.call_id: e.state for e in await journal.entries(session=name)}
                    assert states == {"a": CallState.INTERRUPTED, "b": CallState.QUEUED}
            seen[name] = types_per_call(events)
    finally:
        backend.close()
    assert seen["local"] == {
        "a": ["call_started", "call_finished"],
        "b": ["call_finished"],  # cancelled: it never started
    }
    assert seen["ray"] == seen["local"]
    assert lines_of(workspace / "effects.txt") == []


async def test_a_second_outcome_from_a_worker_is_ignored_and_said(
    workspace: Path, ray_backend: RayBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The dispatcher's handling of what a worker streams back, fed real wire messages (a
    worker does not answer twice unless it is faulty): the first outcome stands."""
    from toolbridge.backends.ray.calls import Pending, Stream
    from toolbridge.backends.ray.dispatch import Dispatcher
    from toolbridge.backends.ray.wire import ANSWER, FAILED, PROGRESS, Context, to_wire
    from toolbridge.core.registry import Invocation
    from toolbridge.core.tool import ToolResult

    registry = SOURCE.registry(ToolContext(workspace=workspace))
    tool = registry.get("quick")
    assert tool is not None
    pool = ray_backend._pool(tool)
    loop = asyncio.get_running_loop()
    dispatcher = Dispatcher(ray_backend)
    call = Pending(
        tool, pool, Context(str(workspace), "s"), {"label": "x"}, "x", 3.0,
        loop.time() + WAIT, None, loop.create_future(), True,
    )  # fmt: skip
    stream = Stream(pool, 0, -1, [call])
    call.stream = stream
    load = pool.load[0]
    pool.load[0] += 1  # as the request that carried it did
    first = Invocation(ToolResult("first"), "first", None, None)
    second = Invocation(ToolResult("second"), "second", None, None)
    with caplog.at_level(logging.WARNING, logger="toolbridge.backends.ray.dispatch"):
        dispatcher._chunk(stream, [(0, ANSWER, to_wire(first)), (0, ANSWER, to_wire(second))])
        dispatcher._chunk(stream, [(0, PROGRESS, (1, 2, None)), (0, FAILED, "late fault")])
    assert call.future.result().result.text == "first"
    assert pool.load[0] == load  # its place on the worker was given back once
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("second outcome" in w for w in warnings), warnings


async def test_a_worker_sends_a_calls_first_outcome_only(caplog: pytest.LogCaptureFixture) -> None:
    from toolbridge.backends.ray.wire import ANSWER, CANCELLED, STARTING
    from toolbridge.backends.ray.worker import _Outbox

    outbox = _Outbox()
    outbox.starting(0)
    outbox.answer(0, ANSWER, "first")
    with caplog.at_level(logging.WARNING, logger="toolbridge.backends.ray.worker"):
        outbox.answer(0, CANCELLED, None)
    assert await outbox.take() == [(0, STARTING, None), (0, ANSWER, "first")]
    assert "answered twice" in caplog.text


@pytest.mark.parametrize("journaled", [False, True])
async def test_a_call_id_that_is_not_text_reads_the_same_on_both_backends(
    workspace: Path, ray_backend: RayBackend, journaled: bool
) -> None:
    batch = [
        ToolCallRequest(1, "quick", {"label": "one"}),
        ToolCallRequest(0, "steps", {"count": 1}),
    ]
    rows = {}
    for name, backend in (("local", LocalBackend()), ("ray", ray_backend)):
        async with SQLiteJournal(workspace / f"{name}.sqlite3") as journal:
            executor = executor_for(workspace, backend, journal=journal if journaled else None)
            outcomes = await asyncio.wait_for(executor.run(batch), WAIT)
        rows[name] = [
            (o.call.id, o.status, o.result.content, o.result.is_error, o.error, o.value)
            for o in outcomes
        ]
    if journaled:  # the journal keys calls by their text id: such a call is refused
        assert all("its call id is not text (int)" in str(row[2]) for row in rows["local"])
    else:
        assert [row[2] for row in rows["local"]] == ["one in time", "1 steps"]
    assert rows["ray"] == rows["local"]


class CannotStart(SQLiteJournal):
    """A real SQLite journal whose disk fills up as a call starts: the start is not
    recorded, so the call must not run."""

    full = True

    async def start(self, key: CallKey) -> None:
        if self.full:
            raise JournalError(f"{self.path}: the disk is full; free some space")
        await super().start(key)


async def test_a_call_whose_start_cannot_be_recorded_never_runs_on_either_backend(
    workspace: Path, ray_backend: RayBackend
) -> None:
    texts = {}
    for name, backend, limit in (("local", LocalBackend(), 1), ("ray", ray_backend, None)):
        batch = [ToolCallRequest("a", "effect", {"label": name})]
        async with CannotStart(workspace / f"{name}.sqlite3") as journal:
            executor = executor_for(workspace, backend, max_concurrency=limit, journal=journal)
            [refused] = await asyncio.wait_for(executor.run(batch), WAIT)
            [entry] = await journal.entries(session="s")
            assert entry.state is CallState.QUEUED, entry  # it never started
            assert name not in lines_of(workspace / "effects.txt")
            journal.full = False  # space again: it runs, as its first attempt
            executor = executor_for(workspace, backend, max_concurrency=limit, journal=journal)
            [ran] = await asyncio.wait_for(executor.run(batch), WAIT)
            [entry] = await journal.entries(session="s")
        assert ran.ok, ran.result.text
        assert (entry.state, entry.attempt) == (CallState.FINISHED, 1)
        texts[name] = refused.result.text.replace(name, "<name>")
    assert "the call was not run: its journal cannot record it" in texts["local"]
    assert texts["ray"] == texts["local"]
    assert lines_of(workspace / "effects.txt") == ["local", "ray"]
