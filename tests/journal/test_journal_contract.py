"""What every journal backend guarantees, run against SQLite and a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from toolbridge.journal import (
    CallJournal,
    CallKey,
    CallState,
    ClaimAction,
    JournalError,
    SQLiteJournal,
    open_journal,
)

WORKER = Path(__file__).with_name("journal_worker.py")
KEY = CallKey("s1", "call-1", "hash-a")


async def test_run_then_replay_never_twice(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        claim = await journal.claim(KEY, "write_file", {"path": "a"})
        assert claim.action is ClaimAction.RUN
        assert (claim.entry.state, claim.entry.attempt) == (CallState.RUNNING, 1)
        await journal.finish(KEY, {"text": "wrote a"}, error_kind=None)
        again = await journal.claim(KEY, "write_file", {"path": "a"})
        assert again.action is ClaimAction.REPLAY
        assert again.entry.outcome == {"text": "wrote a"}
        assert again.entry.arguments == {"path": "a"}
        other_args = await journal.claim(CallKey("s1", "call-1", "hash-b"), "write_file", {})
        assert other_args.action is ClaimAction.RUN  # same id, other arguments: another call
        other_session = await journal.claim(CallKey("s2", "call-1", "hash-a"), "write_file", {})
        assert other_session.action is ClaimAction.RUN


async def test_a_batch_of_claims_answers_each_call(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        keys = [CallKey("batch", f"c{index}", "h") for index in range(50)]
        await journal.claim(keys[0], "t", {})
        await journal.finish(keys[0], {"text": "done"})
        claims = await asyncio.gather(*(journal.claim(key, "t", {"i": 1}) for key in keys))
        assert [claim.action for claim in claims] == [ClaimAction.REPLAY] + [ClaimAction.RUN] * 49
        await asyncio.gather(*(journal.finish(key, {"text": key.call_id}) for key in keys[1:]))
        entries = await journal.entries(session="batch")
        assert sorted(entry.outcome["text"] for entry in entries if entry.outcome) == sorted(
            ["done", *(key.call_id for key in keys[1:])]
        )


async def test_a_second_journal_sees_busy_until_the_owner_finishes(journal_target: str) -> None:
    first, second = await open_journal(journal_target), await open_journal(journal_target)
    assert (await first.claim(KEY, "t", {})).action is ClaimAction.RUN
    assert (await second.claim(KEY, "t", {})).action is ClaimAction.BUSY
    assert (await first.claim(KEY, "t", {})).action is ClaimAction.BUSY  # not twice in one
    waiting = asyncio.create_task(second.claim_when_free(KEY, "t", {}))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await first.finish(KEY, {"text": "first"})
    claim = await asyncio.wait_for(waiting, 30)  # a hang guard, not a speed limit
    assert claim.action is ClaimAction.REPLAY
    assert claim.entry.outcome == {"text": "first"}
    await first.close()
    await second.close()


async def test_a_call_of_a_killed_process_is_interrupted_then_restartable(
    journal_target: str,
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), "hang", journal_target, "c1", stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    assert (await process.stdout.readline()).strip() == b"run"
    key = CallKey("crash", "c1", "h")
    async with await open_journal(journal_target) as journal:
        assert (await journal.claim(key, "slow", {})).action is ClaimAction.BUSY
        process.send_signal(signal.SIGKILL)
        await process.wait()
        claim = await wait_for_action(journal, key, ClaimAction.INTERRUPTED)
        assert (claim.entry.state, claim.entry.attempt) == (CallState.RUNNING, 1)
        restarted = await journal.restart(key)
        assert restarted.attempt == 2
        await journal.finish(key, {"text": "second attempt"})
        assert (await journal.claim(key, "slow", {})).action is ClaimAction.REPLAY


async def wait_for_action(journal: CallJournal, key: CallKey, action: ClaimAction) -> Any:
    """PostgreSQL notices a dead client's connection a moment after the kill: ask until then
    (30 s and more: a bound against hangs, as a busy machine can take seconds)."""
    for _ in range(600):
        claim = await journal.claim(key, "slow", {})
        if claim.action is action:
            return claim
        await asyncio.sleep(0.05)
    raise AssertionError(f"the call never became {action}")


async def test_abandon_leaves_the_call_interrupted(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        await journal.claim(KEY, "t", {})
        await journal.abandon(KEY)
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.INTERRUPTED


async def test_an_approved_retry_reopens_an_interrupted_call_once(journal_target: str) -> None:
    interrupted = {"text": "interrupted", "is_error": True, "error_kind": "interrupted"}
    first, second = await open_journal(journal_target), await open_journal(journal_target)
    assert await first.retry(KEY) is None  # no such call
    await first.claim(KEY, "write", {"path": "a"})
    assert await second.retry(KEY) is None  # running, not interrupted
    await first.finish(KEY, interrupted, error_kind="interrupted")
    approval = {"approved": True, "retry": True, "digest": KEY.args_hash}
    reopened = await first.retry(KEY, approval=approval)
    assert reopened is not None
    assert (reopened.state, reopened.attempt, reopened.outcome) == (CallState.RUNNING, 2, None)
    assert reopened.approval == approval
    assert (await second.claim(KEY, "write", {})).action is ClaimAction.BUSY  # owned by first
    assert await second.retry(KEY) is None  # once: nobody else reopens it
    await first.finish(KEY, {"text": "wrote a"})
    assert await second.retry(KEY) is None  # it has a real outcome now
    replay = await second.claim(KEY, "write", {})
    assert replay.action is ClaimAction.REPLAY
    assert (replay.entry.outcome, replay.entry.attempt) == ({"text": "wrote a"}, 2)
    other = CallKey("s1", "call-2", "h")
    await first.claim(other, "t", {})
    await first.finish(other, {"text": "failed"}, error_kind="execution_error")
    assert await first.retry(other) is None  # only interrupted calls are reopened
    await first.close()
    await second.close()


async def test_a_retry_whose_caller_was_cancelled_leaves_the_call_interrupted(
    journal_target: str,
) -> None:
    async with await open_journal(journal_target) as journal:
        await journal.claim(KEY, "t", {})
        await journal.finish(KEY, {"text": "?"}, error_kind="interrupted")
        release, blocker = hold_the_writer(journal)
        retry = asyncio.ensure_future(journal.retry(KEY))
        await asyncio.sleep(0.05)
        retry.cancel()
        release()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await retry
        await journal.entries()  # the release was queued before this, on the same writer
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.INTERRUPTED


async def test_finish_or_restart_without_a_claim_is_an_error(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        with pytest.raises(JournalError, match="not owned by this journal: claim it first"):
            await journal.finish(KEY, {"text": "?"})
        with pytest.raises(JournalError, match="not owned by this journal: claim it first"):
            await journal.restart(KEY)
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.RUN  # still usable


async def test_a_claim_whose_caller_was_cancelled_is_undone(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        release, blocker = hold_the_writer(journal)
        claim = asyncio.ensure_future(journal.claim(KEY, "t", {}))
        await asyncio.sleep(0.05)
        claim.cancel()
        release()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await claim
        await journal.entries()  # the undo was queued before this, on the same writer
        assert await journal.entry(KEY) is None
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.RUN


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


async def test_two_processes_share_one_journal_each_call_runs_once(
    journal_target: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    count = 60
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), "share", journal_target, str(effects), str(count),
            stdout=subprocess.PIPE,
        )
        for _ in range(2)
    ]  # fmt: skip
    outputs = [(await process.communicate())[0].split() for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    lines = (await asyncio.to_thread(effects.read_text)).splitlines()
    assert sorted(int(line.split()[0]) for line in lines) == list(range(count))  # each once
    assert sum(int(ran) for ran, _ in outputs) == count
    assert sum(int(ran) + int(replayed) for ran, replayed in outputs) == 2 * count


async def test_runs_are_saved_and_loaded(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        assert await journal.load_run("chat") is None
        await journal.save_run("chat", {"messages": [{"role": "user", "content": "hi"}]})
        await journal.save_run("chat", {"messages": [], "turn": 2})
    async with await open_journal(journal_target) as journal:
        assert await journal.load_run("chat") == {"messages": [], "turn": 2}
        assert [name for name, _ in await journal.sessions()] == ["chat"]


async def test_prune_by_age_and_by_session_count(journal_target: str) -> None:
    async with await open_journal(journal_target) as journal:
        for session in ("old", "mid", "new"):
            for index in range(3):
                key = CallKey(session, f"c{index}", "h")
                await journal.claim(key, "t", {})
                await journal.finish(key, {"text": "x"})
            await journal.save_run(session, {})
            await asyncio.sleep(0.01)
        running = CallKey("new", "still-running", "h")
        await journal.claim(running, "t", {})
        assert await journal.prune(keep_sessions=2) == 3  # the old session's three calls
        remaining = {(e.key.session, e.state) for e in await journal.entries()}
        assert remaining == {("mid", "finished"), ("new", "finished"), ("new", "running")}
        assert await journal.prune(older_than=0) == 6
        assert [e.key for e in await journal.entries()] == [running]


async def test_an_outcome_with_text_the_database_cannot_hold_costs_no_other_outcome(
    journal_target: str,
) -> None:
    # A tool's text can hold a lone surrogate (a file name decoded with surrogateescape) or
    # NUL (`find -print0`): neither fits PostgreSQL's JSONB, and no lone surrogate fits
    # UTF-8. Storing one must not fail the other calls of its batch (they ran).
    hostile = "name \udcff and \x00 nul, not an escape: \\u0000"
    async with await open_journal(journal_target) as journal:
        keys = [CallKey("hostile", f"c{index}", "h") for index in range(3)]
        claims = await asyncio.gather(
            *(
                journal.claim(key, "t", {"text": hostile if key is keys[1] else "ok"})
                for key in keys
            )
        )
        assert [claim.action for claim in claims] == [ClaimAction.RUN] * 3
        await asyncio.gather(
            *(journal.finish(key, {"text": hostile if key is keys[1] else "ok"}) for key in keys)
        )
        replays = [await journal.claim(key, "t", {}) for key in keys]
        assert [claim.action for claim in replays] == [ClaimAction.REPLAY] * 3
        stored = replays[1].entry.outcome
        assert stored is not None
        assert stored["text"].replace("\x00", "\ufffd") == (
            "name \ufffd and \ufffd nul, not an escape: \\u0000"
        )
        assert replays[0].entry.outcome == {"text": "ok"}


@pytest.mark.parametrize(("session", "call_id"), [("\udcffsession", "c1"), ("s1", "call\udcff")])
async def test_a_call_the_journal_cannot_store_is_refused_alone(
    journal_target: str, session: str, call_id: str
) -> None:
    # A session named from a non-UTF-8 command line, or a model's odd call id: the journal
    # cannot store it, so that claim is refused, clearly; the rest of its batch runs.
    async with await open_journal(journal_target) as journal:
        odd = CallKey(session, call_id, "h")
        good, refused = await asyncio.gather(
            journal.claim(KEY, "t", {}), journal.claim(odd, "t", {}), return_exceptions=True
        )
        assert isinstance(refused, JournalError), refused
        assert "cannot be stored in the journal" in str(refused)
        assert not isinstance(good, BaseException) and good.action is ClaimAction.RUN
        await journal.finish(KEY, {"text": "ok"})
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.REPLAY


async def test_a_damaged_row_fails_its_own_claim_not_the_batch(journal_target: str) -> None:
    # One record damaged on disk (edited, or written by a buggy tool) must not refuse the
    # whole batch it is claimed in, nor leave the batch's new calls owned with nobody
    # running them (they answered "busy" to every later claim).
    damaged = CallKey("s1", "damaged", "h")
    async with await open_journal(journal_target) as journal:
        await journal.claim(damaged, "t", {})
        await journal.finish(damaged, {"text": "ok"})
    await asyncio.to_thread(damage_state, journal_target, damaged)
    async with await open_journal(journal_target) as journal:
        fresh, refused = await asyncio.gather(
            journal.claim(KEY, "t", {}), journal.claim(damaged, "t", {}), return_exceptions=True
        )
        assert isinstance(refused, JournalError), refused
        assert "holds a record of call 'damaged' (session 's1') it cannot read" in str(refused)
        assert not isinstance(fresh, BaseException) and fresh.action is ClaimAction.RUN
        await journal.finish(KEY, {"text": "ran once"})
        assert (await journal.claim(KEY, "t", {})).action is ClaimAction.REPLAY


def damage_state(target: str, key: CallKey) -> None:
    """Write a state no toolbridge writes into the row of `key`, behind the journal's back."""
    query = "UPDATE toolbridge_calls SET state = 'bogus' WHERE call_id = "
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(query + "%s", (key.call_id,))
    else:
        with contextlib.closing(sqlite3.connect(target)) as conn:
            conn.execute(query + "?", (key.call_id,))
            conn.commit()


async def test_an_outcome_json_cannot_hold_as_is_costs_no_other_outcome(
    journal_target: str,
) -> None:
    # NaN and infinities (a mean of nothing, from a data tool) have no JSON number and
    # PostgreSQL's JSONB refuses them; a value that holds itself has no JSON at all. Either
    # is its own call's problem: the other outcomes of the batch are stored.
    looped: dict[str, Any] = {"text": "loop"}
    looped["self"] = looped
    outcomes: list[dict[str, Any]] = [
        {"value": [math.nan, math.inf, -math.inf]},
        looped,
        {"text": "ok"},
    ]
    async with await open_journal(journal_target) as journal:
        keys = [CallKey("numbers", f"c{index}", "h") for index in range(3)]
        await asyncio.gather(*(journal.claim(key, "t", {}) for key in keys))
        done = await asyncio.gather(
            *(journal.finish(key, outcome) for key, outcome in zip(keys, outcomes, strict=True)),
            return_exceptions=True,
        )
        assert done[0] is None and done[2] is None, done
        assert isinstance(done[1], JournalError), done[1]
        assert "cannot be stored in the journal as JSON" in str(done[1])
        assert (await journal.entry(keys[2])) is not None
        stored = await journal.claim(keys[0], "t", {})
        assert stored.action is ClaimAction.REPLAY and stored.entry.outcome is not None
        assert stored.entry.outcome["value"] == ["NaN", "Infinity", "-Infinity"]  # by name
        assert (await journal.claim(keys[2], "t", {})).entry.outcome == {"text": "ok"}


async def test_two_processes_taking_over_the_same_interrupted_calls_run_each_once(
    journal_target: str, tmp_path: Path
) -> None:
    # Calls left running by a dead process, and calls finished as interrupted whose retry
    # the user approved: two processes reach for all of them at once.
    count = 40
    async with await open_journal(journal_target) as journal:
        for index in range(count):
            key = CallKey("orphans", f"call-{index}", "h")
            await journal.claim(key, "effect", {"index": index})
            if index % 2:
                await journal.finish(key, {"text": "?"}, error_kind="interrupted")
            else:
                await journal.abandon(key)
    effects = tmp_path / "effects.txt"
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), "orphans", journal_target, str(effects), str(count),
            stdout=subprocess.PIPE,
        )
        for _ in range(2)
    ]  # fmt: skip
    outputs = [(await process.communicate())[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    lines = (await asyncio.to_thread(effects.read_text)).splitlines()
    assert sorted(int(line.split()[0]) for line in lines) == list(range(count))  # each once
    assert sum(int(output) for output in outputs) == count


async def test_a_child_the_process_forked_does_not_keep_its_calls_owned(
    journal_target: str,
) -> None:
    # A tool's multiprocessing worker is forked, not executed: it inherited the owner lock's
    # descriptor, so after the process was killed its calls stayed "busy" for as long as
    # the worker lived, instead of being found interrupted.
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(WORKER), "fork", journal_target, "c1", stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    child = int(await process.stdout.readline())
    try:
        process.send_signal(signal.SIGKILL)
        await process.wait()
        async with await open_journal(journal_target) as journal:
            await wait_for_action(journal, CallKey("crash", "c1", "h"), ClaimAction.INTERRUPTED)
    finally:
        os.kill(child, signal.SIGKILL)


async def test_entries_come_in_pages_and_sessions_are_counted(journal_target: str) -> None:
    # An export of a large journal reads it a page at a time, in one stable order.
    async with await open_journal(journal_target) as journal:
        for n in range(7):
            key = CallKey("s1" if n % 2 else "s2", f"c{n}", "h")
            await journal.claim(key, "t", {"n": n})
            await journal.finish(key, {"text": str(n)})
        everything = await journal.entries()
        paged = [entry async for entry in journal.iter_entries(page=2)]
        assert [e.key for e in paged] == [e.key for e in everything] and len(paged) == 7
        only = [entry async for entry in journal.iter_entries(session="s1", page=2)]
        assert [e.key.call_id for e in only] == ["c1", "c3", "c5"]
        assert [e.key.call_id for e in await journal.entries(limit=2, after=everything[4])] == [
            e.key.call_id for e in everything[5:7]
        ]
        assert await journal.counts() == {"s1": 3, "s2": 4}
        with pytest.raises(ValueError, match="limit must be 0 or more"):
            await journal.entries(limit=-1)


async def test_a_session_is_held_by_one_run_at_a_time(journal_target: str) -> None:
    from toolbridge.journal import SessionInUse

    async with await open_journal(journal_target) as first:
        async with await open_journal(journal_target) as second:
            await first.hold_session("s1")
            with pytest.raises(SessionInUse, match="'s1' is in use by another run"):
                await second.hold_session("s1")  # another journal (another process)
            with pytest.raises(SessionInUse):
                await first.hold_session("s1")  # another run through the same journal
            await second.hold_session("s2")  # other sessions stay free
            first.release_session("s1")
            await first.sessions()  # PostgreSQL lets go through its writer, in order
            await second.hold_session("s1")
            second.release_session("s1")
            second.release_session("s2")
        await first.close()
        async with await open_journal(journal_target) as third:
            await third.hold_session("s1")  # a closed journal holds nothing
