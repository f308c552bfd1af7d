"""The SQLite journal's writer: the operations an event loop submits, gathered while its
turns bring more and applied in one transaction (group commit).

With durability "process" a commit is a write to the WAL with no fsync, so the batch
runs right there on the loop when the database is free (no thread hand-off, which on a
busy machine cost more than the work). When another process holds the write lock, or
with durability "power" (an fsync per commit), the batch goes to a writer thread instead,
and the loop does not wait. Copying the WAL back into the file (a checkpoint, with its
fsyncs: about 12 ms for a thousand pages here) is the writer thread's too: the loop
never waits for it.
Ownership changes only once a batch has committed; a job's failure is its own; an answer
nobody heard is undone. A batch's new rows, starts and outcomes are written at commit, so
a job on a call an earlier job of the batch named goes in the next transaction.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

from toolbridge.journal.base import Durability, deliver
from toolbridge.journal.claims import not_owned, once_each
from toolbridge.journal.records import CallKey, JournalError, journal_closed
from toolbridge.journal.rows import COLUMNS
from toolbridge.journal.sqlite_file import BUSY_TIMEOUT_MS, database_error
from toolbridge.journal.sqlite_owners import Owner

__all__ = ["NULL", "GroupCommit", "Job", "Op", "Outcomes", "Undo"]

logger = logging.getLogger(__name__)

Op = Callable[[sqlite3.Connection], Any]
Undo = Callable[[sqlite3.Connection, Any], None]

AT_ONCE = 64
"""Jobs in one transaction on the loop, at most: the first calls of a large batch start
their tools while the next rows are written (their outcomes are then stored while the
last ones still run), and the loop is never held long by one transaction."""
GATHER_TURNS = 3
"""Turns of the loop that jobs wait for more, at most (see `GroupCommit._gather`)."""
CHECKPOINT_PAGES = 1000
"""How long the WAL grows (in pages) before the writer thread copies it back into the
file: SQLite's own default, which the loop's connection no longer runs itself."""
_CHECKPOINT = "checkpoint"  # asks the writer thread for a checkpoint, in its queue of jobs


@dataclass(slots=True)
class Job:
    """One operation and where its answer goes; `undo` runs if nobody is left to hear it."""

    op: Op
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any] | None
    undo: Undo | None = None
    claims: Sequence[CallKey] = ()  # the calls a claim asks about: their rows are read first
    calls: Sequence[CallKey] = ()  # the calls it concerns: a batch names each once (`once_each`)
    outcomes: Outcomes | None = None  # a group of outcomes to store: `future` is None


@dataclass(slots=True)
class Outcomes:
    """Outcomes a loop queued in a row (`GroupCommit._store_soon`): one job, not a job, a
    closure and a step of the batch each. Each call's row of `_FINISH` and the future its
    caller waits on; the job answers the failed ones (place -> error)."""

    keys: list[CallKey]
    rows: list[tuple[Any, ...]]
    futures: list[asyncio.Future[None]]


def _part(jobs: list[Job]) -> int:
    """How many of `jobs`, from the first, go in one transaction: each call once (its
    rows are written at commit, after the batch's other statements)."""
    calls = [key for job in jobs for key in job.calls]
    if len(set(calls)) == len(calls):  # the common case: every call once
        return len(jobs)
    return once_each(job.calls for job in jobs)


_NONE_SEEN = (0, 0)


def _count(jobs: list[Job]) -> tuple[int, int]:
    """How many `jobs` there are, and how many outcomes the last holds (a group grows):
    what tells `GroupCommit._gather` that a turn brought more."""
    last = jobs[-1].outcomes if jobs else None
    return len(jobs), 0 if last is None else len(last.keys)


def _worth(jobs: list[Job]) -> tuple[int, int]:
    """How many of `jobs`, from the first, one transaction on the loop takes (at least
    one), and how many jobs they are worth: `AT_ONCE` at most, a group of outcomes worth
    one job each (as each was one before it was grouped)."""
    worth = 0
    for place, job in enumerate(jobs):
        weight = 1 if job.outcomes is None else len(job.outcomes.keys)
        if place and worth + weight > AT_ONCE:
            return place, worth
        worth += weight
    return len(jobs), worth


def _undo(job: Job, answer: Any) -> Job:
    """The job that undoes what `job` did, whose `answer` nobody heard."""
    undo = job.undo
    assert undo is not None
    return Job(lambda conn: undo(conn, answer), job.loop, None)


class GroupCommit:
    """The writer of a `SQLiteJournal`: a loop's jobs gathered (`_gather`), applied a batch
    at a time.

    Its journal opens `_conn` and `_owner`, says how a write begins (`_begin`), whether
    this writer checkpoints and where the WAL is (`_checkpoints`, `_wal`, `_page_size`),
    and starts the thread that runs `_serve`."""

    path: Path
    _conn: sqlite3.Connection
    _owner: Owner
    _begin: str
    _checkpoints: bool  # this writer checkpoints the WAL (the loop's connection does not)
    _wal: Path  # the WAL file, and its page size: when to checkpoint
    _page_size: int

    def __init__(self, durability: Durability) -> None:
        self._jobs: queue.SimpleQueue[list[Job] | str | None] = queue.SimpleQueue()
        # One batch at a time (on the loop or the writer thread); batches handed to the
        # thread and not done yet (none: a batch may run on the loop without overtaking).
        self._writing = threading.Lock()
        self._handed = 0
        self._handed_lock = threading.Lock()
        self._inline = durability == "process"
        # Jobs submitted on a loop and not handed over yet (see `_gather`), and the lock
        # that keeps a `close` from another thread from taking them while a loop adds one.
        self._pending: dict[asyncio.AbstractEventLoop, list[Job]] = {}
        self._pending_lock = threading.Lock()
        self._closed = False
        # The writer thread was told to stop (`_stop_writer`): what a loop still hands over
        # (jobs it took before `close` took the rest) is answered closed, not queued behind it.
        self._stopped = False
        self._checkpoint_asked = False  # a checkpoint is in the writer thread's queue
        # Per batch, on the writer thread: the rows its claims asked about, new rows to insert,
        # finished calls to store.
        self._rows: dict[CallKey, Any] = {}
        self._inserts: list[tuple[Any, ...]] = []
        self._finishes: list[tuple[Any, ...]] = []
        self._starts: list[tuple[Any, ...]] = []
        self._taken: list[CallKey] = []  # owned from this batch on, unless it rolls back
        self._dropped: list[CallKey] = []  # not owned from this batch on, even if it fails
        self._let_go: list[CallKey] = []  # not owned once this batch commits

    async def _submit(
        self,
        op: Op,
        *,
        undo: Undo | None = None,
        claims: Sequence[CallKey] = (),
        calls: Sequence[CallKey] = (),
    ) -> Any:
        job = self._queue(op, undo, claims, calls)
        assert job.future is not None
        try:
            return await job.future
        except asyncio.CancelledError:
            # Stopped just as its answer came (set, so `_settle` delivered it): nobody acts
            # on it, so it is undone here.
            future = job.future
            heard = future.done() and not future.cancelled() and future.exception() is None
            if undo is not None and heard and not self._closed:
                self._put([_undo(job, future.result())])
            raise

    def _queue(
        self,
        op: Op,
        undo: Undo | None = None,
        claims: Sequence[CallKey] = (),
        calls: Sequence[CallKey] = (),
    ) -> Job:
        """Add `op` to the loop's jobs (handed to the writer once gathered, `_gather`);
        `calls`, the calls it concerns (a claim's: those it `claims`)."""
        loop = asyncio.get_running_loop()
        job = Job(op, loop, loop.create_future(), undo, claims, calls or claims)
        lock = self._pending_lock
        lock.acquire()  # (not `with`: twice as long, and this runs twice per call)
        try:
            if self._closed:
                raise journal_closed(str(self.path))
            pending = self._pending.get(loop)
            if pending is None:  # the first job: hand the jobs over once they stop coming
                pending = self._pending[loop] = []
                loop.call_soon(self._gather, loop, _NONE_SEEN, 0)
            pending.append(job)
        finally:
            lock.release()
        return job

    def _store_soon(self, key: CallKey, outcome: str, error_kind: str) -> asyncio.Future[None]:
        """Queue storing a call's outcome (its text, and its error kind or `NULL`), finished
        now: a future that is done once it is stored. Outcomes queued in a row are one job
        (`Outcomes`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        row = (outcome, error_kind, time.time(), *key)
        lock = self._pending_lock
        lock.acquire()  # (not `with`: see `_queue`)
        try:
            if self._closed:
                raise journal_closed(str(self.path))
            pending = self._pending.get(loop)
            if pending is None:
                pending = self._pending[loop] = []
                loop.call_soon(self._gather, loop, _NONE_SEEN, 0)
            group = pending[-1].outcomes if pending else None
            if group is not None and len(group.keys) < AT_ONCE:  # the common case
                group.keys.append(key)
                group.rows.append(row)
                group.futures.append(future)
                return future
            group = Outcomes([key], [row], [future])  # a group of its own
            op = partial(self._store, group)
            pending.append(Job(op, loop, None, calls=group.keys, outcomes=group))
        finally:
            lock.release()
        return future

    def _store(self, group: Outcomes, conn: sqlite3.Connection) -> dict[int, JournalError]:
        """An `Outcomes` job: the outcome of each call this journal owns goes in at commit;
        storing another's fails, for that call alone (so does a second outcome of one)."""
        keys = group.keys
        if self._owner.held.issuperset(keys) and len(set(keys)) == len(keys):  # the common case
            self._finishes.extend(group.rows)
            self._let_go.extend(keys)
            return {}
        held = set(self._owner.held)
        failed: dict[int, JournalError] = {}
        for place, key in enumerate(keys):
            if key in held:
                held.discard(key)  # stored once: a second outcome finds it not owned
                self._finishes.append(group.rows[place])
                self._let_go.append(key)
            else:
                failed[place] = not_owned(key)
        return failed

    def _gather(self, loop: asyncio.AbstractEventLoop, seen: tuple[int, int], turns: int) -> None:
        """Hand over the jobs `loop` submitted once a turn of it brought no more (`seen`:
        how many were there a turn before, `_count`), a transaction's worth is waiting, or
        after a few turns.

        One batch, not one per call: the 200 claims of a batch are one commit. Nor one
        per turn: a task that an answer or a freed slot wakes runs a turn later, so a
        finished call's outcome and the start of the call that takes its slot go in one
        commit. On the loop, a transaction takes `AT_ONCE` jobs (`_worth`); the rest wait
        a turn, in which the tasks their answers woke run first."""
        with self._pending_lock:
            jobs = self._pending.get(loop)
            if not jobs:  # (`close` handed them over)
                return
            count = _count(jobs)
            take, worth = _worth(jobs)
            if count != seen and worth < AT_ONCE and turns < GATHER_TURNS:
                loop.call_soon(self._gather, loop, count, turns + 1)
                return
            rest = None
            if self._inline and take < len(jobs):
                rest = self._pending[loop] = jobs[take:]
                jobs = jobs[:take]
            else:
                del self._pending[loop]
        if rest is None:
            self._hand_over(jobs)
            return
        try:
            self._hand_over(jobs)
        finally:  # after the tasks it woke; even after a stop: else the loop's jobs wait
            loop.call_soon(self._gather, loop, _count(rest), 0)

    def _hand_over(self, jobs: list[Job]) -> None:
        """Apply `jobs` on the loop if the database is free, else hand them to the thread."""
        if self._inline and self._handed == 0 and self._writing.acquire(blocking=False):
            running = 0  # jobs of the part in `_run_batch`: answered when a stop leaves it
            try:  # the database is ours: no thread hand-off (see the module docstring)
                while jobs and self._handed == 0:
                    running = _part(jobs)
                    if not self._run_batch(jobs[:running], inline=True):
                        break
                    jobs, running = jobs[running:], 0
            except BaseException:  # a stop in a part: the later parts still go to the thread
                if jobs[running:]:
                    self._put(jobs[running:])
                raise
            finally:
                self._writing.release()
        if jobs:
            self._put(jobs)

    def _put(self, jobs: list[Job]) -> None:
        """Hand `jobs` to the writer thread; once it was told to stop, answer them closed
        (a loop in another thread took them from `_pending` before `close` took the rest,
        and hands them over after: queued behind the stop, their callers would wait for
        ever)."""
        with self._pending_lock:
            if not self._stopped:
                with self._handed_lock:
                    self._handed += 1
                self._jobs.put(jobs)
                return
        closed = journal_closed(str(self.path))
        self._answer([(job, False, closed) for job in jobs])

    def _stop_writer(self) -> None:
        """Tell the writer thread to stop once it applied what it was handed."""
        with self._pending_lock:
            self._stopped = True
            self._jobs.put(None)

    def _serve(self) -> None:
        while (first := self._jobs.get()) is not None:
            if isinstance(first, str):  # _CHECKPOINT
                with self._writing:
                    self._checkpoint()
                continue
            jobs = list(first)
            handed = 1
            stop = False
            checkpoint = False  # asked for behind these jobs: run after them
            while True:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                if isinstance(more, str):  # _CHECKPOINT
                    checkpoint = True
                    continue
                jobs.extend(more)
                handed += 1
            try:
                with self._writing:
                    # The loop's batches do not wait for another process: this one may.
                    self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                    try:
                        while jobs:
                            part = _part(jobs)
                            self._run_batch(jobs[:part])
                            jobs = jobs[part:]
                    finally:
                        if self._inline:
                            self._conn.execute("PRAGMA busy_timeout = 0")
                        if checkpoint:  # even after a batch that failed: never asked in vain
                            self._checkpoint()
            except Exception as exc:  # a dead thread would leave every caller waiting
                logger.exception("journal batch failed on %s", self.path)
                error = JournalError(f"the journal {self.path} failed: {exc!r}")
                self._answer([(job, False, error) for job in jobs])
            finally:
                with self._handed_lock:
                    self._handed -= handed
            if stop:
                break
        with self._writing:  # not under a batch another event loop runs
            self._conn.close()
        self._owner.close()

    def _begin_at_once(self) -> bool:
        """Begin a write transaction if no other process holds the write lock (no wait:
        the connection's busy timeout is 0 outside the writer thread)."""
        try:
            self._conn.execute(self._begin)
        except sqlite3.Error:
            return False  # busy, or failing: the writer thread tries, and says why
        return True

    def _run_batch(self, jobs: list[Job], *, inline: bool = False) -> bool:
        """Apply `jobs` in one transaction; ownership changes only once it has committed.

        `inline` (on the event loop): False, with nothing done, when another process holds
        the write lock (the writer thread waits for it, not the loop)."""
        if inline and not self._begin_at_once():
            return False
        held = self._owner.held
        self._clear()
        answers: list[tuple[Job, bool, Any]] = []  # (an undo's job has no caller to answer)
        stop: BaseException | None = None
        try:
            if not inline:
                self._conn.execute(self._begin)
            answers = self._apply(jobs)
            self._conn.execute("COMMIT")
            self._checkpoint_soon(inline)
        except BaseException as exc:  # the batch is undone as a whole, and so is what it took
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            held.difference_update(self._taken)
            if isinstance(exc, sqlite3.Error):
                error = database_error(self.path, exc, "record calls")
            elif isinstance(exc, Exception):
                logger.exception("journal batch failed on %s", self.path)
                error = JournalError(f"the journal {self.path} failed: {exc!r}")
            else:  # a stop (a signal's handler) landed in it: answered, then it goes on
                stop = exc
                error = JournalError(f"the journal {self.path} was stopped: {exc!r}")
            answers = [(job, False, error) for job in jobs]
        else:
            held.difference_update(self._let_go)
        if inline and _runs_here(jobs[0].loop):  # every job's loop (`_hand_over`): no wake-up
            self._settle_all(answers)
        else:
            self._answer(answers)
        if stop is not None:
            raise stop
        return True

    def _clear(self) -> None:
        """Forget what a batch gathered (before it runs, or runs again)."""
        self._taken.clear()
        self._dropped.clear()
        self._let_go.clear()
        self._inserts.clear()
        self._finishes.clear()
        self._starts.clear()

    def _apply(self, jobs: list[Job]) -> list[tuple[Job, bool, Any]]:
        """Run `jobs`' operations in the open transaction and write the rows they gathered:
        each job's answer.

        A claim takes a call no row of this batch names as new, without reading it first
        (new calls are the common case, and the read was about 5% of the journal's work a
        call on W5). Should one meet a stored row after all (its ``INSERT OR IGNORE`` skipped),
        the batch goes back to its savepoint and runs again with its claims' rows read
        first (a replay, a call another process holds or left), as PostgreSQL's
        journal reads rows only when a claim did not go in."""
        conn = self._conn
        keys = [key for job in jobs for key in job.claims]
        # A call this journal holds has a row that says how it is (a claim of it is busy).
        read = not self._owner.held.isdisjoint(keys)
        if keys and not read:
            conn.execute("SAVEPOINT toolbridge_claims")
        self._rows = _rows(conn, keys) if read else {}
        while True:
            answers = self._run_ops(jobs)
            if self._write() or not keys:
                return answers
            if read:  # under the write lock, a row read as absent cannot appear
                raise JournalError(
                    f"the journal {self.path} failed: a claim met a row it did not read"
                )
            conn.execute("ROLLBACK TO toolbridge_claims")  # as if never run: again
            self._owner.held.difference_update(self._taken)
            self._owner.held.update(self._dropped)
            self._clear()
            self._rows = _rows(conn, keys)
            read = True

    def _drop(self, key: CallKey) -> None:
        """Stop owning `key` at once, even if this batch fails (see `SQLiteJournal.abandon`);
        not if it runs again (`_apply`)."""
        self._owner.held.discard(key)
        self._dropped.append(key)

    def _run_ops(self, jobs: list[Job]) -> list[tuple[Job, bool, Any]]:
        """Each job's operation, in order: its answer; a job's failure is its own."""
        held = self._owner.held
        answers: list[tuple[Job, bool, Any]] = []
        for job in jobs:
            taken, inserts = len(self._taken), len(self._inserts)
            try:
                answers.append((job, True, job.op(self._conn)))
            except sqlite3.Error:
                raise
            except Exception as exc:  # one job's failure is its own, never the thread's
                held.difference_update(self._taken[taken:])
                del self._taken[taken:], self._inserts[inserts:]
                if not isinstance(exc, JournalError):
                    logger.exception("journal operation failed on %s", self.path)
                    exc = JournalError(f"the journal {self.path} failed: {exc!r}")
                answers.append((job, False, exc))
        return answers

    def _wal_pages(self) -> int:
        """About how many pages the WAL holds: its size (cut back once it is copied, see
        `sqlite_file.connect`); 0 when there is none."""
        try:
            return os.stat(self._wal).st_size // self._page_size
        except OSError:
            return 0

    def _write(self) -> bool:
        """Write the rows the batch's jobs gathered, each kind a chunk of rows a statement
        (`_write_rows`): whether every new row went in."""
        complete = True
        if self._inserts:
            complete = _write_rows(self._conn, _INSERT, self._inserts) == len(self._inserts)
        if self._starts:
            _write_rows(self._conn, _START, self._starts, update=True)
        if self._finishes:
            _write_rows(self._conn, _FINISH, self._finishes, update=True)
        return complete

    def _checkpoint_soon(self, inline: bool) -> None:
        """After a commit: once the WAL is long, checkpoint now on the writer thread, or
        ask it to (once) from the loop."""
        if not self._checkpoints or self._wal_pages() < CHECKPOINT_PAGES:
            return
        if not inline:
            self._checkpoint()
        elif not self._checkpoint_asked:
            self._checkpoint_asked = True
            self._jobs.put(_CHECKPOINT)

    def _checkpoint(self) -> None:
        """Copy the WAL back into the file (on the writer thread, under `_writing`), as far
        as readers allow; a failure is logged: the outcomes are durable in the WAL."""
        self._checkpoint_asked = False
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:
            logger.warning("could not checkpoint the journal %s: %s", self.path, exc)

    def _answer(self, answers: list[tuple[Job, bool, Any]]) -> None:
        """Send each answer to its caller's loop: one wake-up of each loop, not one per call.
        A loop closed meanwhile (its ``asyncio.run`` ended) hears nothing: what its jobs
        took is undone here, and the writer goes on serving the other loops."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, bool, Any]]] = {}
        for answer in answers:
            if answer[0].future is not None or answer[0].outcomes is not None:  # (not an undo)
                by_loop.setdefault(answer[0].loop, []).append(answer)
        for loop, batch in by_loop.items():
            try:
                loop.call_soon_threadsafe(self._settle_all, batch)
            except RuntimeError:  # the loop is closed
                for job, ok, value in batch:
                    if ok and job.undo is not None:
                        self._put([_undo(job, value)])

    def _settle_all(self, answers: list[tuple[Job, bool, Any]]) -> None:
        for job, ok, value in answers:
            future = job.future
            if ok and future is not None and not future.cancelled():  # as `_settle`, faster
                future.set_result(value)
            else:
                self._settle(job, ok, value)

    def _settle(self, job: Job, ok: bool, value: Any) -> None:
        """On the caller's loop: hand over the answer, or undo it if the caller is gone."""
        if job.outcomes is not None:  # each its own answer (nothing to undo)
            futures = job.outcomes.futures
            if ok and not value:  # the common case: all stored
                for future in futures:
                    if not future.cancelled():
                        future.set_result(None)
                return
            for place, future in enumerate(futures):
                if ok and place not in value:
                    deliver(future, True, None)
                else:
                    deliver(future, False, value[place] if ok else value)
            return
        if job.future is None:  # an undo's job: nobody asked
            return
        if not deliver(job.future, ok, value) and ok and job.undo is not None and not self._closed:
            self._put([_undo(job, value)])


NULL = ""
"""What the batched statements take for NULL, where a value may be missing (an approval, a
start, an error kind): binding None makes `sqlite3` look up an adapter, raising and
clearing two exceptions inside it (4,600 instructions a call on W5, of about 62,000 for
the statements). No stored text of those columns is empty."""
MULTI_ROW = (64, 32, 16, 8)
"""How many rows one statement writes when a transaction has at least 8 of a kind: they are
cut into chunks of these sizes, so each statement has one of a few texts, which `sqlite3`
prepares once and keeps. A statement of 64 rows took a third less work per row than 64
runs of a one-row statement (`executemany`: a step, a reset and the bindings each); below
8 rows the VALUES to join cost more than they save, so the last few rows (and a small
transaction's, under `max_concurrency`) go a row a statement."""


def _statements(text: Callable[[str], str], row: str, one: str) -> dict[int, str]:
    """A statement's text for each size of `MULTI_ROW` (`text` of that many `row`s of
    VALUES), and under the size 1 `one`, the statement of a single row."""
    texts = {size: text(", ".join([row] * size)) for size in MULTI_ROW}
    texts[1] = one
    return texts


UPDATE_FROM = sqlite3.sqlite_version_info >= (3, 33, 0)
"""SQLite has ``UPDATE ... FROM`` (3.33, 2020); before it, a row is updated a statement."""


def _write_rows(
    conn: sqlite3.Connection, statements: dict[int, str], rows: list[Any], *, update: bool = False
) -> int:
    """Write `rows` with `statements` (`_statements`): chunks of `MULTI_ROW` sizes, the
    largest that fits first, then the rows left a row a statement (all of them, for an
    `update` where SQLite has no ``UPDATE FROM``). How many rows the statements changed."""
    start = changed = 0
    if UPDATE_FROM or not update:
        while (left := len(rows) - start) >= MULTI_ROW[-1]:
            size = 1 << (min(left, MULTI_ROW[0]).bit_length() - 1)
            cursor = conn.execute(
                statements[size], list(chain.from_iterable(rows[start : start + size]))
            )
            changed += cursor.rowcount
            start += size
    if start < len(rows):
        changed += conn.executemany(statements[1], rows[start:]).rowcount
    return changed


def _update(update: str, row: str, keyed: str, one: str) -> dict[int, str]:
    """The texts of an update (`_statements`) of the rows of VALUES, each found by its key
    (`keyed`: one primary-key search each)."""
    return _statements(lambda rows: f"{update} FROM (VALUES {rows}) AS v WHERE {keyed}", row, one)


_ROW = "(?, ?, ?, ?, ?, ?, 1, NULL, NULL, NULLIF(?, ''), ?, NULLIF(?, ''), NULL, ?)"
_INSERT = _statements(  # (a row already stored is skipped: see `GroupCommit._apply`)
    lambda rows: f"INSERT OR IGNORE INTO toolbridge_calls ({COLUMNS}, owner) VALUES {rows}",
    _ROW,
    f"INSERT OR IGNORE INTO toolbridge_calls ({COLUMNS}, owner) VALUES {_ROW}",
)
_STARTED = "UPDATE toolbridge_calls SET state = 'running'"
_START = _update(
    f"{_STARTED}, started_at = v.column1",
    "(?, ?, ?, ?)",
    "session = v.column2 AND call_id = v.column3 AND args_hash = v.column4 AND state = 'queued'",
    f"{_STARTED}, started_at = ? "
    "WHERE session = ? AND call_id = ? AND args_hash = ? AND state = 'queued'",
)
_FINISHED = "UPDATE toolbridge_calls SET state = 'finished', owner = NULL"
_FINISH = _update(
    f"{_FINISHED}, outcome = v.column1, error_kind = NULLIF(v.column2, ''), "
    "finished_at = v.column3",
    "(?, ?, ?, ?, ?, ?)",
    "session = v.column4 AND call_id = v.column5 AND args_hash = v.column6",
    f"{_FINISHED}, outcome = ?, error_kind = NULLIF(?, ''), finished_at = ? "
    "WHERE session = ? AND call_id = ? AND args_hash = ?",
)
_ROWS_AT_ONCE = 300  # three variables a key, under SQLite's lowest variable limit


_JOINED_COLUMNS = ", ".join(f"c.{name.strip()}" for name in COLUMNS.split(",")) + ", c.owner"


def _rows(conn: sqlite3.Connection, keys: list[CallKey]) -> dict[CallKey, Any]:
    """The stored rows of `keys`, read with a few statements instead of one per key.

    The keys are joined to the table (one primary-key search each); ``(...) IN (VALUES
    ...)`` would scan the whole table, so a claim would slow down as the journal grows.
    """
    found: dict[CallKey, Any] = {}
    for start in range(0, len(keys), _ROWS_AT_ONCE):
        chunk = keys[start : start + _ROWS_AT_ONCE]
        values = ", ".join(["(?, ?, ?)"] * len(chunk))
        for row in conn.execute(
            f"SELECT {_JOINED_COLUMNS} FROM (VALUES {values}) AS k "
            "CROSS JOIN toolbridge_calls AS c ON c.session = k.column1 "
            "AND c.call_id = k.column2 AND c.args_hash = k.column3",
            list(chain.from_iterable(chunk)),  # (a key is its three parts)
        ):
            found[CallKey(row[0], row[1], row[2])] = row
    return found


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is the loop running in this thread (its futures can be set here)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
