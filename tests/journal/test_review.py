"""Acceptance review of the journal: what an independent check found, each on SQLite and a
real PostgreSQL server where the journal's backend matters."""

from __future__ import annotations

import asyncio
import threading
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
from toolbridge.core.errors import ErrorKind
from toolbridge.execution.approval import arguments_digest
from toolbridge.journal import (
    CallJournal,
    CallKey,
    CallState,
    ClaimAction,
    JournalError,
    SQLiteJournal,
    open_journal,
)
from toolbridge.journal.recorder import CallRecorder


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for this object")


async def test_a_refused_call_with_arguments_json_cannot_hold_is_recorded_not_raised(
    journal_target: str, tmp_path: Path
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    hostile = {"k": {(1, 2): 3}, "r": {"a": _Unprintable(), "b": 1}}
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        outcomes = await executor.run([ToolCallRequest(i, "add", a) for i, a in hostile.items()])
        assert [o.kind for o in outcomes] == [ErrorKind.INVALID_ARGUMENTS] * 2
        entries = await journal.entries(session="s")
    assert sorted(e.key.call_id for e in entries) == ["k", "r"]
    assert {e.state for e in entries} == {CallState.REFUSED}
    by_id = {e.key.call_id: e.arguments for e in entries}
    assert by_id["k"] == {"(1, 2)": 3}
    assert by_id["r"]["b"] == 1 and "_Unprintable" in by_id["r"]["a"]


async def test_a_call_id_that_is_not_text_is_an_error_of_that_call_alone(
    journal_target: str, tmp_path: Path
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        number, none, fine = await executor.run([
            ToolCallRequest(5, "add", {"a": 1, "b": 2}),  # type: ignore[arg-type]
            ToolCallRequest(None, "no_such_tool", {}),  # type: ignore[arg-type]
            ToolCallRequest("c", "add", {"a": 1, "b": 2}),
        ])  # fmt: skip
        assert fine.ok and fine.result.text == "3"
        assert number.kind is ErrorKind.INVALID_ARGUMENTS  # the model's id: it resends
        assert "call id is not text" in number.result.text
        assert "failed: AttributeError" not in number.result.text
        assert none.kind is ErrorKind.UNKNOWN_TOOL
        entries = await journal.entries(session="s")
    # Both refusals are in the audit trail, their ids as JSON (id 5 was refused when the
    # journal could not hold it as a key: it did not run).
    assert sorted((e.key.call_id, e.state) for e in entries) == [
        ("5", CallState.REFUSED),
        ("c", CallState.FINISHED),
        ("null", CallState.REFUSED),
    ]


async def test_an_unheard_claim_of_a_queued_call_leaves_it_queued_not_interrupted(
    journal_target: str,
) -> None:
    key = CallKey("s", "c1", "d" * 64)
    async with await open_journal(journal_target) as first:  # claims it queued, then dies
        assert (await first.claim(key, "t", {}, queued=True)).action is ClaimAction.RUN
    async with await open_journal(journal_target) as journal:
        release, blocker = hold_the_writer(journal)
        claim = asyncio.ensure_future(journal.claim(key, "t", {}))  # to run it at once
        await asyncio.sleep(0.05)
        claim.cancel()  # the caller never hears the answer, so never starts the tool
        release()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await claim
        await journal.entries()  # the undo was queued before this, on the same writer
        entry = await journal.entry(key)
        assert entry is not None and entry.state is CallState.QUEUED
        again = await journal.claim(key, "t", {})
        assert again.action is ClaimAction.RUN and again.entry.attempt == 1


def hold_the_writer(journal: CallJournal) -> tuple[Any, asyncio.Future[Any]]:
    """Keep the journal's writer busy until `release()`, so a claim waits in its queue."""
    if isinstance(journal, SQLiteJournal):
        gate = threading.Event()
        journal._inline = False  # batches go to the writer thread (held), not run on the loop
        return gate.set, asyncio.ensure_future(journal._submit(lambda conn: gate.wait(5)))
    event = asyncio.Event()

    async def wait(conn: object) -> None:
        await event.wait()

    return event.set, asyncio.ensure_future(journal._submit(wait))  # type: ignore[attr-defined]


def test_a_folder_given_as_the_journal_says_it_is_a_folder(tmp_path: Path) -> None:
    for create in (True, False):
        with pytest.raises(JournalError, match="is a folder, not a journal file"):
            SQLiteJournal(tmp_path, create=create)
    assert list(tmp_path.iterdir()) == []


async def test_a_reader_opened_before_the_owners_file_existed_sees_a_live_call_running(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    async with SQLiteJournal(path):
        pass
    (tmp_path / "journal.sqlite3-owners").unlink()  # a journal restored without its side file
    key = CallKey("s", "c1", "d" * 64)
    async with SQLiteJournal(path, create=False) as reader, SQLiteJournal(path) as writer:
        assert (await writer.claim(key, "t", {})).action is ClaimAction.RUN
        entry = await reader.entry(key)
        assert entry is not None and entry.state is CallState.RUNNING
    async with SQLiteJournal(path, create=False) as reader:  # the writer is gone now
        entry = await reader.entry(key)
        assert entry is not None and entry.state is CallState.INTERRUPTED


async def test_a_redactor_that_fails_on_refused_arguments_neither_raises_nor_leaks(
    journal_target: str, tmp_path: Path
) -> None:
    @tool
    def login(user: str, token: str) -> str:
        """Log in."""
        return f"welcome {user}"

    def redact(name: str, arguments: Mapping[str, Any]) -> Any:
        return {**arguments, "token": arguments["token"][:2] + "***"}  # valid arguments only

    registry = ToolRegistry([login], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=CallRecorder(journal, "s", redact=redact))
        ok, missing, text = await executor.run([
            ToolCallRequest("a", "login", {"user": "u", "token": "secret-a"}),
            ToolCallRequest("b", "login", {"user": "secret-b"}),  # invalid: no token
            ToolCallRequest("c", "login", '{"token": "secret-c"'),  # type: ignore[arg-type]
        ])  # fmt: skip
        assert ok.ok and ok.result.text == "welcome u"
        assert missing.kind is ErrorKind.INVALID_ARGUMENTS
        assert text.kind is ErrorKind.ARGUMENTS_NOT_JSON
        entries = {e.key.call_id: e for e in await journal.entries(session="s")}
    assert entries["a"].arguments == {"user": "u", "token": "se***"}
    assert {e.state for e in entries.values()} == {CallState.FINISHED, CallState.REFUSED}
    assert "secret" not in str([e.arguments for e in entries.values()])


async def test_calls_skipped_after_a_failure_are_in_the_audit_trail(
    journal_target: str, tmp_path: Path
) -> None:
    ran: list[str] = []

    @tool
    def step(name: str) -> str:
        """Do one step; the step named 'bad' fails."""
        ran.append(name)
        if name == "bad":
            raise ValueError("bad step")
        return name

    registry = ToolRegistry([step], context=ToolContext(workspace=tmp_path, session="s"))
    policy = ExecutionPolicy(fail_on_tool_error=True, persist_results=False)
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, policy, journal=journal)
        outcomes = await executor.run(
            [ToolCallRequest(f"c{i}", "step", {"name": n}) for i, n in enumerate(["bad", "x"])]
        )
        assert ran == ["bad"] and outcomes[1].kind is ErrorKind.CANCELLED
        entries = {e.key.call_id: e for e in await journal.entries(session="s")}
    assert entries["c0"].state is CallState.FINISHED
    assert (entries["c1"].state, entries["c1"].error_kind) == (CallState.REFUSED, "cancelled")


async def test_a_call_whose_start_could_not_be_recorded_is_not_stored_as_finished(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    @tool
    def step(name: str) -> str:
        """Do one step."""
        ran.append(name)
        return f"did {name}"

    class StartFailsOnce(SQLiteJournal):
        """A real journal whose first `start` fails, as a full disk or a lock held too
        long would make it (then the disk has room again)."""

        failed = False

        async def start(self, key: CallKey) -> None:
            if not self.failed:
                self.failed = True
                raise JournalError("the disk holding the journal is full")
            await super().start(key)

    registry = ToolRegistry([step], context=ToolContext(workspace=tmp_path, session="s"))
    policy = ExecutionPolicy(max_concurrency=1, persist_results=False)
    call = ToolCallRequest("c1", "step", {"name": "a"})
    async with StartFailsOnce(tmp_path / "journal.sqlite3") as journal:
        [first] = await ToolExecutor(registry, policy, journal=journal).run([call])
        assert first.kind is ErrorKind.EXECUTION_ERROR and "was not run" in first.result.text
        assert ran == []
        [again] = await ToolExecutor(registry, policy, journal=journal).run([call])
    assert again.ok and again.result.text == "did a" and ran == ["a"]


async def test_a_journal_failure_after_taking_over_an_interrupted_call_lets_it_go(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def look(name: str) -> str:
        """Look something up (read-only: re-run after a crash)."""
        ran.append(name)
        return f"found {name}"

    class RestartFailsOnce(SQLiteJournal):
        """A real journal whose first `restart` fails (a full disk, then room again)."""

        failed = False

        async def restart(self, key: CallKey, *, queued: bool = False) -> Any:
            if not self.failed:
                self.failed = True
                raise JournalError("the disk holding the journal is full")
            return await super().restart(key, queued=queued)

    registry = ToolRegistry([look], context=ToolContext(workspace=tmp_path, session="s"))
    call = ToolCallRequest("c1", "look", {"name": "a"})
    path = tmp_path / "journal.sqlite3"
    async with SQLiteJournal(path) as crashed:  # it started the call, then went away
        key = CallKey("s", "c1", arguments_digest("look", {"name": "a"}))
        assert (await crashed.claim(key, "look", {"name": "a"})).action is ClaimAction.RUN
    async with RestartFailsOnce(path) as journal:
        executor = ToolExecutor(registry, journal=journal)
        [first] = await executor.run([call])
        assert "was not run" in first.result.text and ran == []
        # A real hang (the call kept as this journal's own, busy forever) reaches the limit.
        [again] = await asyncio.wait_for(executor.run([call]), 30)
    assert again.ok and again.result.text == "found a" and ran == ["a"]


async def test_a_run_cancelled_while_taking_over_an_interrupted_call_lets_it_go(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    @tool(read_only=True)
    def look(name: str) -> str:
        """Look something up (read-only: re-run after a crash)."""
        ran.append(name)
        return f"found {name}"

    class SlowRestart(SQLiteJournal):
        """A real journal whose first `restart` waits until the test lets it go on."""

        entered = asyncio.Event()
        waited = False

        async def restart(self, key: CallKey, *, queued: bool = False) -> Any:
            if not self.waited:
                self.waited = True
                self.entered.set()
                await asyncio.Event().wait()  # until cancelled
            return await super().restart(key, queued=queued)

    registry = ToolRegistry([look], context=ToolContext(workspace=tmp_path, session="s"))
    call = ToolCallRequest("c1", "look", {"name": "a"})
    path = tmp_path / "journal.sqlite3"
    async with SQLiteJournal(path) as crashed:  # it started the call, then went away
        key = CallKey("s", "c1", arguments_digest("look", {"name": "a"}))
        assert (await crashed.claim(key, "look", {"name": "a"})).action is ClaimAction.RUN
    async with SlowRestart(path) as journal:
        executor = ToolExecutor(registry, journal=journal)
        task = asyncio.create_task(executor.run([call]))
        await asyncio.wait_for(journal.entered.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # A real hang (the call kept as this journal's own, busy forever) reaches the limit.
        [again] = await asyncio.wait_for(executor.run([call]), 30)
    assert again.ok and again.result.text == "found a" and ran == ["a"]


async def test_a_redactor_that_fails_on_a_call_about_to_run_is_not_called_a_tool_failure(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    @tool
    def login(user: str, token: str) -> str:
        """Log in."""
        ran.append(user)
        return f"welcome {user}"

    def redact(name: str, arguments: Mapping[str, Any]) -> Any:
        return {**arguments, "token": arguments["token"].encode("ascii").hex()}

    registry = ToolRegistry([login], context=ToolContext(workspace=tmp_path, session="s"))
    async with SQLiteJournal(tmp_path / "journal.sqlite3") as journal:
        executor = ToolExecutor(registry, journal=CallRecorder(journal, "s", redact=redact))
        [outcome] = await executor.run([
            ToolCallRequest("a", "login", {"user": "u", "token": "sécret"}),
        ])  # fmt: skip
        assert await journal.entries(session="s") == []
    assert ran == [] and outcome.kind is ErrorKind.EXECUTION_ERROR
    assert "the call was not run" in outcome.result.text
    assert "redactor failed on the arguments: UnicodeEncodeError" in outcome.result.text
    assert "tool 'login' failed" not in outcome.result.text


async def test_a_call_refused_for_a_duplicate_id_is_in_the_audit_trail(
    journal_target: str, tmp_path: Path
) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    registry = ToolRegistry([add], context=ToolContext(workspace=tmp_path, session="s"))
    async with await open_journal(journal_target) as journal:
        executor = ToolExecutor(registry, journal=journal)
        first, twin = await executor.run([
            ToolCallRequest("c", "add", {"a": 1, "b": 2}),
            ToolCallRequest("c", "add", {"a": 5, "b": 5}),
        ])  # fmt: skip
        assert first.ok and twin.kind is ErrorKind.INVALID_ARGUMENTS
        entries = await journal.entries(session="s")
    assert sorted(e.state for e in entries) == [CallState.FINISHED, CallState.REFUSED]
    [refused] = [e for e in entries if e.state is CallState.REFUSED]
    assert refused.arguments == {"a": 5, "b": 5} and "already used" in str(refused.outcome)
