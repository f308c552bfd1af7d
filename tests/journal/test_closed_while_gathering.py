"""Closing a SQLite journal while operations wait to be gathered: a claim whose caller was
cancelled meanwhile is not run at close (nobody would undo it then, and the call, which
never ran, would read as interrupted), and the others are answered; a close from
another thread never loses a job a loop is adding."""

from __future__ import annotations

import asyncio
import linecache
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from toolbridge.journal import CallKey, CallState, Claim, ClaimAction, SQLiteJournal

LIMIT = 30.0  # only a real hang reaches it


async def test_a_claim_whose_caller_is_gone_is_not_run_by_close(workspace: Path) -> None:
    path = workspace / "j.sqlite3"
    gone, heard = CallKey("s", "gone", "h"), CallKey("s", "heard", "h")
    journal = SQLiteJournal(path)
    cancelled = asyncio.ensure_future(journal.claim(gone, "t", {}))
    answered = asyncio.ensure_future(journal.claim(heard, "t", {}))
    await asyncio.sleep(0)  # both claims submitted, neither handed to the writer yet
    assert len(journal._pending[asyncio.get_running_loop()]) == 2
    cancelled.cancel()
    await journal.close()  # in this turn: the jobs are still waiting to be gathered
    assert cancelled.cancelled()
    assert (await asyncio.wait_for(answered, LIMIT)).action is ClaimAction.RUN
    async with SQLiteJournal(path) as again:
        assert await again.entry(gone) is None  # never happened
        claim = await again.claim(gone, "t", {})
        assert claim.action is ClaimAction.RUN and claim.entry.attempt == 1
        assert (await again.claim(heard, "t", {})).action is ClaimAction.INTERRUPTED


async def test_an_outcome_nobody_waits_for_is_still_stored_by_close(workspace: Path) -> None:
    path = workspace / "j.sqlite3"
    key = CallKey("s", "ran", "h")
    journal = SQLiteJournal(path)
    assert (await journal.claim(key, "t", {})).action is ClaimAction.RUN
    storing = journal.finish_soon(key, {"text": "done"})
    storing.cancel()  # its caller stopped waiting: the call ran all the same
    await journal.close()  # in this turn: the jobs are still waiting to be gathered
    async with SQLiteJournal(path) as again:
        entry = await again.entry(key)
        assert entry is not None and entry.state is CallState.FINISHED, entry
        assert entry.outcome == {"text": "done"}


def _about_to_run(frame: FrameType, event: str, function: str, text: str) -> bool:
    """Whether a traced `frame` is about to run a line of `function` starting with `text`."""
    if event != "line" or frame.f_code.co_name != function:
        return False
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip().startswith(text)


def _claiming(journal: SQLiteJournal, tracer: Any, answers: list[object]) -> threading.Thread:
    """A thread that claims a call on a loop of its own, traced by `tracer`; its answer, or
    what it raised, goes to `answers`."""

    def claim() -> None:
        sys.settrace(tracer)

        async def claiming() -> object:
            try:
                return await asyncio.wait_for(journal.claim(CallKey("s", "c", "h"), "t", {}), LIMIT)
            except Exception as exc:
                return exc

        try:
            answers.append(asyncio.run(claiming()))
        finally:
            sys.settrace(None)

    return threading.Thread(target=claim)


def test_a_close_from_another_thread_never_loses_a_job_a_loop_is_adding(
    workspace: Path,
) -> None:
    # A loop in one thread adds a claim to its jobs while `close` runs in another. Paused
    # at the moment the job goes into its loop's list (a trace function holds it there),
    # the claim used to go into a list `close` had already taken away: never handed over,
    # its caller waited for ever. Now `close` waits for the job to be added, and answers it.
    journal = SQLiteJournal(workspace / "j.sqlite3")
    adding, add = threading.Event(), threading.Event()  # the loop thread is at the append
    closing = threading.Event()  # `close` is about to take the jobs
    answers: list[object] = []

    def hold_the_append(frame: FrameType, event: str, arg: object) -> object:
        if not adding.is_set() and _about_to_run(frame, event, "_queue", "pending.append(job)"):
            adding.set()
            add.wait(LIMIT)
        return hold_the_append

    def see_the_take(frame: FrameType, event: str, arg: object) -> object:
        if _about_to_run(frame, event, "close", "with self._pending_lock:"):
            closing.set()
        return see_the_take

    def close() -> None:
        sys.settrace(see_the_take)
        try:
            asyncio.run(journal.close())
        finally:
            sys.settrace(None)

    claimer = _claiming(journal, hold_the_append, answers)
    claimer.start()
    assert adding.wait(LIMIT), "the claim never reached its loop's jobs"
    closer = threading.Thread(target=close)
    closer.start()
    while not closing.is_set() and closer.is_alive():  # about to take the jobs, or done
        closing.wait(0.01)
    add.set()
    claimer.join(LIMIT)
    closer.join(LIMIT)
    assert len(answers) == 1
    answer = answers[0]
    assert isinstance(answer, Claim) and answer.action is ClaimAction.RUN, answer


def test_a_close_from_another_thread_never_loses_jobs_a_loop_took_to_hand_over(
    workspace: Path,
) -> None:
    # A loop's `_gather` takes its jobs out of `_pending` (under the lock), then hands them
    # over (outside it). A close from another thread in between found nothing pending,
    # stopped the writer thread and returned; the jobs then went to a writer that no longer
    # reads its queue, and their callers waited for ever. Now they are answered: closed.
    journal = SQLiteJournal(workspace / "j.sqlite3")
    taken, go_on = threading.Event(), threading.Event()
    answers: list[object] = []

    def hold_the_hand_over(frame: FrameType, event: str, arg: object) -> object:
        if not taken.is_set() and _about_to_run(frame, event, "_gather", "if rest is None:"):
            taken.set()
            go_on.wait(LIMIT)
        return hold_the_hand_over

    claimer = _claiming(journal, hold_the_hand_over, answers)
    claimer.start()
    assert taken.wait(LIMIT), "the loop never took its jobs to hand them over"
    closer = threading.Thread(target=lambda: asyncio.run(journal.close()))
    closer.start()
    closer.join(LIMIT)  # nothing pending: the close ends while the jobs are in hand
    go_on.set()
    claimer.join(LIMIT)
    assert not closer.is_alive()
    assert len(answers) == 1
    answer = answers[0]
    assert not isinstance(answer, TimeoutError), "the claim was never answered"
    assert isinstance(answer, Claim) or "closed" in str(answer), answer
