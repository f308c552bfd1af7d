"""The PostgreSQL journal's writer task: operations queued on one connection and applied
batch by batch, a batch's starts in one statement and its claims and finishes in another.

A batch gathers what a few turns of the event loop bring. Its starts go first, in a
statement of their own, and are answered at once: under a concurrency limit a call's tool
waits for its start mark, and a slot's hand-over brings the outcome of the call that
ended with the start of the next one, so the start would otherwise wait for the outcome's
update too. Its claims and finishes then go as one statement (`postgres_sql.write_sql`),
answered by two counts, and only a claim that met a stored call reads rows (replay, busy,
or take it over). A batch of claims (`claim_many`) is one job with one answer, a list
(`Claims`). A job on a call an earlier job of the batch named goes in the next
statement. A failure is the answer of the operations it concerns, never of the writer; a
claim nobody heard is undone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from toolbridge.journal.base import deliver
from toolbridge.journal.claims import (
    LetGo,
    claim_action,
    claimed_state,
    not_owned,
    once_each,
    running_entry,
    unheard,
)
from toolbridge.journal.postgres_connection import server_error
from toolbridge.journal.postgres_sql import (
    KEY,
    KEYS,
    kept,
    key_columns,
    qualified,
    text_array,
    write_sql,
)
from toolbridge.journal.records import (
    CallKey,
    Claim,
    ClaimAction,
    JournalEntry,
    JournalError,
    journal_closed,
)
from toolbridge.journal.rows import COLUMNS, JSONB, NewCall

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["BatchWriter", "Claims", "Finish", "Job", "Operation", "Query", "Release", "Start"]

logger = logging.getLogger(__name__)

_FIRST_WRITE = 0.001  # seconds: what a batch's statement is taken to cost before one ran
_LONGEST_GATHER = 0.005  # seconds: however long the last statement took

Query = Callable[["AsyncConnection[Any]"], Awaitable[Any]]
"""An operation run on its own: a function of the connection."""


@dataclass(slots=True)
class Claims:
    """Claim calls, in one job: answered with a list, each claim's answer (a `Claim`, or
    the `JournalError` of that claim alone) in the place of its call. One job, one future
    and one answer for a batch of claims (`claim_many`), where a job each cost a future,
    a queueing and an answer per call."""

    calls: list[NewCall]
    requeue: set[CallKey] | None = None
    """The calls whose claim took a queued row to run (not inserted it): undone by
    queueing them again, not deleting them, if nobody hears the answer (`unheard`)."""


@dataclass(slots=True)
class Start:
    """Mark an owned, queued call running."""

    key: CallKey


@dataclass(slots=True)
class Finish:
    """Store an owned call's outcome (as JSONB text) and let go of it."""

    key: CallKey
    outcome_text: str
    error_kind: str | None


@dataclass(slots=True)
class Release:
    """Let go of owned calls, as `how` says (see `LetGo`)."""

    keys: list[CallKey]
    how: LetGo = LetGo.DISOWN


class _Unsent(Exception):
    """The statement of a batch failed: nothing of it was written."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


_LET_GO = {
    LetGo.DELETE: "DELETE FROM toolbridge_calls AS c USING",
    LetGo.REQUEUE: "UPDATE toolbridge_calls AS c SET owner = NULL, state = 'queued', "
    "started_at = NULL FROM",
    LetGo.DISOWN: "UPDATE toolbridge_calls AS c SET owner = NULL FROM",
}
"""How `_release` lets go of calls (see `LetGo`)."""
_HELD = "c.owner = %(owner)s AND c.state IN ('queued', 'running')"
"""The rows `_release` lets go of: owned, not finished."""
_STORED_NOW = "c.state = 'finished' AND c.finished_at = %(now)s"
"""The rows whose outcome a batch (its time ``now``) stored."""


Operation = Claims | Start | Finish | Release | Query
Op = TypeVar("Op", bound=Operation)


class Job(Generic[Op]):
    """One operation and where its answer goes (None: nobody waits for it)."""

    __slots__ = ("future", "op")

    def __init__(self, op: Op, future: asyncio.Future[Any] | None) -> None:
        self.op = op
        self.future = future


class BatchWriter:
    """The writer of a `PostgresJournal`: its connection, owner number and owned calls,
    and the task that applies queued operations to them."""

    def __init__(self, conn: AsyncConnection[Any], *, description: str, owner: int) -> None:
        import psycopg

        self._conn = conn
        self._description = description
        self._owner = owner
        self._errors = (psycopg.Error, ValueError, TypeError)  # what a statement may raise
        self._errors_read = (psycopg.Error, JournalError)  # what reading rows may raise
        self._held: set[CallKey] = set()
        self._last_now = 0.0  # see `_now`
        self._write_time = _FIRST_WRITE  # how long the last batch's statement took
        self._loop = asyncio.get_running_loop()
        self._jobs: list[Job[Any]] = []  # queued for the next batch
        self._answers: list[tuple[Job[Any], bool, Any]] = []  # of the batch being applied
        self._idle: asyncio.Future[None] | None = None  # the writer waits on it for a job
        self._closed = False
        self._cut_off: JournalError | None = None  # see `_hang_up`
        self._writer = asyncio.create_task(self._serve(), name="toolbridge-journal")

    def _queue(self, job: Job[Any]) -> None:
        """Queue `job` for the next batch."""
        self._jobs.append(job)
        self._wake()

    def _wake(self) -> None:
        """Wake the writer if it waits for a job."""
        idle = self._idle
        if idle is not None:
            self._idle = None
            if not idle.done():
                idle.set_result(None)

    def _submit_soon(self, op: Operation) -> Job[Any]:
        """Queue `op` for the writer: its job, whose future gets the answer."""
        if self._closed:
            raise journal_closed(f"at {self._description}")
        job = Job(op, self._loop.create_future())
        self._queue(job)
        return job

    async def _submit(self, op: Operation) -> Any:
        """Queue `op` for the writer and wait for its answer."""
        return await self._answer_of(self._submit_soon(op))

    async def _answer_of(self, job: Job[Any]) -> Any:
        """Wait for the answer of `job` (queued); if stopped first, nobody hears it."""
        future = job.future
        assert future is not None
        try:
            return await future
        except asyncio.CancelledError:
            self._unheard(job)
            raise

    def _unheard(self, job: Job[Any]) -> None:
        """Its caller was stopped: nobody acts on `job`'s answer. One not answered yet is
        cancelled (`_settle` undoes a claim nobody heard); a claim answered just as the
        stop came (set, so `_settle` delivered it) is undone as `_settle` would have (its
        new row deleted, a queued row it took queued again)."""
        future = job.future
        assert future is not None
        if not future.done():
            future.cancel()
            return
        if not future.cancelled() and future.exception() is None and not self._closed:
            self._undo(job, future.result())

    def _undo(self, job: Job[Any], answer: Any) -> None:
        """Undo what `answer` (of `job`) took, now that nobody acts on it: a claim that
        runs its call or took it over (see `unheard`), or each such claim of `Claims`."""
        if type(answer) is Claim:  # a retry's (a `Query`)
            claims: list[Any] = [answer]
            requeue: set[CallKey] | None = None
        elif type(job.op) is Claims and type(answer) is list:
            claims, requeue = answer, job.op.requeue
        else:
            return
        let_go: dict[LetGo, list[CallKey]] = {}
        for claim in claims:
            if type(claim) is Claim:
                key = claim.entry.key
                how = unheard(claim, inserted=requeue is None or key not in requeue)
                if how is not None:
                    let_go.setdefault(how, []).append(key)
        for how, keys in let_go.items():
            self._queue(Job(Release(keys, how), None))

    async def _stop(self) -> None:
        """Take no more jobs, apply those queued, and end the writer task."""
        self._closed = True
        self._wake()
        await self._writer

    def _hang_up(self, why: JournalError) -> None:
        """Cut the connection off (its server does not answer): the statement waiting for
        the server fails at once, as every later one does, each job answered with `why`.
        Shut down, not closed: the driver's socket number stays its own until it closes."""
        import psycopg

        logger.error("%s", why)
        self._cut_off = why
        with (
            contextlib.suppress(OSError, psycopg.Error),  # closed or lost: nothing waits
            socket.socket(fileno=os.dup(self._conn.fileno())) as sock,
        ):
            sock.shutdown(socket.SHUT_RDWR)

    async def _serve(self) -> None:
        """Apply queued jobs batch by batch until `_stop`."""
        while True:
            if not self._jobs:
                if self._closed:
                    return
                self._idle = self._loop.create_future()
                await self._idle
                continue
            # Let the calls scheduled with this one queue theirs too: one batch, not two.
            # While each turn of the loop brings more (the calls of a batch finishing one
            # after another), wait one more turn, for at most as long as the last statement
            # took (a job that came just after it was sent would wait that long behind it),
            # and never more than a few milliseconds (one slow statement is no rule).
            waiting = -1
            until = self._loop.time() + min(self._write_time, _LONGEST_GATHER)
            while len(self._jobs) != waiting and (waiting < 0 or self._loop.time() < until):
                waiting = len(self._jobs)
                await asyncio.sleep(0)
            jobs, self._jobs = self._jobs, []
            await self._run_batch(jobs)

    async def _run_batch(self, jobs: list[Job[Any]]) -> None:
        """Apply `jobs` in order, each call once a part: a job on a call an earlier one
        of the part names starts the next part. One statement changes a row once (of two
        of its parts updating one row, one is lost) and decides ownership before any of
        them, so the later job is answered as it would be after the earlier one's."""
        named: list[CallKey] = []  # the common case, checked at once: every call once
        for job in jobs:
            op = job.op
            kind = type(op)
            if kind is Finish or kind is Start:
                named.append(op.key)
            elif kind is Claims:
                named += [call.key for call in op.calls]
            elif kind is Release:
                named += op.keys
        if len(set(named)) == len(named):
            await self._run_part(jobs)
            return
        while jobs:
            end = once_each(_calls(job.op) for job in jobs)
            await self._run_part(jobs[:end])
            jobs = jobs[end:]

    async def _run_part(self, jobs: list[Job[Any]]) -> None:
        """Starts, with the outcomes gathered with them, in one statement, answered at once
        (tools wait for them); claims in another; the rest one by one, in order. Each job
        names a call no other job of the part names, so their order does not change what
        they do. A failure is the answer of the jobs it concerns, never of the writer.

        An outcome goes with the starts, not after them: under `max_concurrency` the call
        that freed a slot is stored finished no later than the start of the call that took
        it (its outcome is submitted first), so a reader never counts more calls running
        than the limit lets run."""
        claims: list[Job[Claims]] = []
        starts: list[Job[Start]] = []
        finishes: list[Job[Finish]] = []
        others: list[Job[Release | Query]] = []
        for job in jobs:
            kind = type(job.op)
            if kind is Claims:
                claims.append(job)
            elif kind is Finish:
                finishes.append(job)
            elif kind is Start:
                starts.append(job)
            else:
                others.append(job)
        if starts:
            await self._write([], starts, finishes)
            finishes = []
            self._hand_over()
            if claims or others:
                await asyncio.sleep(0)  # their tools start before the rest is sent
        if claims or finishes:
            await self._write(claims, [], finishes)
        for other in others:
            op = other.op
            try:
                value = await (self._release(op) if isinstance(op, Release) else op(self._conn))
            except self._errors as exc:
                self._fail([other], exc)
            except JournalError as exc:  # refused before it wrote anything
                self._answer(other, False, exc)
            else:
                self._answer(other, not isinstance(value, JournalError), value)
        self._hand_over()

    def _hand_over(self) -> None:
        """Settle the answers noted so far (`_answer`)."""
        answers, self._answers = self._answers, []
        for job, ok, value in answers:
            future = job.future
            if future is None:
                continue
            if future.cancelled():  # nobody hears it: undo what it took
                self._settle(job, ok, value)
            elif ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _answer(self, job: Job[Any], ok: bool, value: Any) -> None:
        """Note the answer of `job`: the batch's answers are handed over once it is done."""
        self._answers.append((job, ok, value))

    def _settle(self, job: Job[Any], ok: bool, value: Any) -> None:
        """Hand `value` to whoever waits for `job`; when nobody is left to hear a claim,
        its call never ran, so the claim is undone."""
        future = job.future
        if future is not None and not deliver(future, ok, value) and ok and not self._closed:
            self._undo(job, value)

    def _fail(self, jobs: list[Job[Any]], error: Exception) -> None:
        """Answer each of `jobs` with what `error` means for the journal."""
        failed = self._cut_off or (
            error if isinstance(error, JournalError) else server_error(error, self._description)
        )
        for job in jobs:
            self._answer(job, False, failed)

    def _now(self) -> float:
        """The time of a batch, distinct from every earlier batch's of this journal: rows a
        statement wrote are told apart by it (with the owner) without ``RETURNING``."""
        now = max(time.time(), self._last_now + 1e-6)
        self._last_now = now
        return now

    async def _write(
        self, claims: list[Job[Claims]], starts: list[Job[Start]], finishes: list[Job[Finish]]
    ) -> None:
        """Claims, starts and finishes in one statement (`write_sql`), each answered. Its
        counts say whether every claim went in and every outcome was stored (the common
        case); only otherwise are rows read. If it fails and held more than one kind, each
        kind is sent again on its own, so a failure is the answer of the operations it
        concerns (the failed statement changed nothing)."""
        try:
            await self._write_once(claims, starts, finishes)
        except _Unsent as unsent:
            groups: list[list[Job[Any]]] = [g for g in (claims, starts, finishes) if g]
            if len(groups) == 1:
                self._fail(groups[0], unsent.error)
                return
            logger.info("journal %s: a batch failed as one (%s); its parts go on their own",
                        self._description, unsent.error)  # fmt: skip
            parts: list[tuple[list[Job[Claims]], list[Job[Start]], list[Job[Finish]]]] = [
                (claims, [], []), ([], starts, []), ([], [], finishes)]  # fmt: skip
            for part in parts:
                group: list[Job[Any]] = [*part[0], *part[1], *part[2]]
                if group:
                    try:
                        await self._write_once(*part)
                    except _Unsent as alone:
                        self._fail(group, alone.error)

    async def _write_once(
        self, claims: list[Job[Claims]], starts: list[Job[Start]], finishes: list[Job[Finish]]
    ) -> None:
        """`_write` as one statement, each job answered; `_Unsent`, with none answered,
        when the statement itself failed (so it changed nothing)."""
        held = self._held
        now = self._now()
        calls = claims[0].op.calls if len(claims) == 1 else [
            call for job in claims for call in job.op.calls]  # fmt: skip
        starting = [job for job in starts if job.op.key in held]
        owned = [job for job in finishes if job.op.key in held]
        done: set[CallKey] = set()
        ran: list[Claim] = []  # the answers if every claim inserted its row
        contested: list[Claim | JournalError] | None = None
        if calls or starting or owned:
            sql = write_sql(claims=bool(calls), starts=bool(starting), finishes=bool(owned))
            sent = self._loop.time()
            try:
                params = self._write_params(calls, starting, owned, now)
                if calls:  # their answers are built while the server works
                    statement = self._loop.create_task(self._counts(sql, params))
                    await asyncio.sleep(0)  # sent
                    ran = [_ran(call, now) for call in calls]
                    claimed, finished = await statement
                else:
                    claimed, finished = await self._counts(sql, params)
            except self._errors as exc:
                raise _Unsent(exc) from None
            self._write_time = self._loop.time() - sent
            if owned:  # stored: a failure to read which ones is the error of these alone
                try:
                    done = await self._finished(owned, finished, now)
                except self._errors_read as exc:
                    self._fail(owned, exc)
                    finishes = [job for job in finishes if job.op.key not in held]
            if calls and claimed != len(calls):  # some met a stored call, or a key twice
                try:
                    contested = await self._contested(claims, now)
                except self._errors_read as exc:  # a record it cannot read, say
                    self._fail(claims, exc)
                    claims, calls = [], []
        if contested is None:  # every claim inserted its row: each runs its call
            held.update([call.key for call in calls])
        self._answer_claims(claims, ran if contested is None else contested)
        for start in starts:
            key = start.op.key
            self._answer(start, key in held, None if key in held else not_owned(key))
        answers = self._answers  # as `_answer` notes them, a call less per outcome
        for finish in finishes:
            key = finish.op.key
            answers.append((finish, True, None) if key in done else (finish, False, not_owned(key)))

    def _answer_claims(
        self, claims: list[Job[Claims]], answers: list[Claim] | list[Claim | JournalError]
    ) -> None:
        """Answer each job of `claims` with its calls' `answers` (those of all of them, in
        order)."""
        if len(claims) == 1:
            self._answer(claims[0], True, answers)
            return
        place = 0
        for job in claims:
            end = place + len(job.op.calls)
            self._answer(job, True, answers[place:end])
            place = end

    async def _counts(self, sql: str, params: dict[str, Any]) -> tuple[int, int]:
        """Run a batch's statement: how many rows it claimed and how many it finished."""
        cursor = await self._conn.execute(sql, params)
        row = await cursor.fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (-1, -1)

    async def _contested(self, jobs: list[Job[Claims]], now: float) -> list[Claim | JournalError]:
        """Claims some of which met a stored call: the rows this batch inserted (this
        journal's owner and this batch's time) run; of the others, replay, busy (a live
        owner runs it), or take over an interrupted one (its owner died, or let go of it);
        a record that cannot be read is the error of its own claim. The answers of all
        `jobs`' calls, in order."""
        rows = await self._owned_rows([call.key for job in jobs for call in job.op.calls])
        owners = {owner for _, owner in rows.values() if owner not in (None, self._owner)}
        alive = await self._alive(owners)
        answers: list[Claim | JournalError] = []
        for job, op in [(claims, call) for claims in jobs for call in claims.op.calls]:
            entry, owner = rows.get(op.key, (None, None))
            if isinstance(entry, JournalError):
                answers.append(entry)
            elif entry is None:  # removed since the insert (an unheard claim undone): ask again
                busy = running_entry(op.key, op.tool, op.arguments, op.approval, now)
                answers.append(Claim(ClaimAction.BUSY, busy))
            elif (
                owner == self._owner and entry.created_at == now and op.key not in self._held
            ):  # inserted by this batch: the first claim of a key runs it, a repeat is busy
                self._held.add(op.key)
                answers.append(_ran(op, now))
            elif (
                action := claim_action(entry, owner, held=self._held, alive=alive.__contains__)
            ) in (ClaimAction.REPLAY, ClaimAction.BUSY):
                answers.append(Claim(action, entry))
            elif action is ClaimAction.RUN:  # it was queued, never started: same attempt
                taken = await self._take_over(op.key, owner, "queued", op.queued)
                if taken is not None:  # an unheard claim queues it again
                    if job.op.requeue is None:
                        job.op.requeue = set()
                    job.op.requeue.add(op.key)
                action = ClaimAction.RUN if taken is not None else ClaimAction.BUSY
                answers.append(Claim(action, taken or entry))
            elif (taken := await self._take_over(op.key, owner)) is not None:
                answers.append(Claim(ClaimAction.INTERRUPTED, taken))
            else:  # another process took it over first
                answers.append(Claim(ClaimAction.BUSY, entry))
        return answers

    async def _owned_rows(
        self, keys: list[CallKey]
    ) -> dict[CallKey, tuple[JournalEntry | JournalError, int | None]]:
        cursor = await self._conn.execute(
            f"SELECT {qualified(COLUMNS)}, c.owner FROM {KEYS} AS u(s, c, h) "
            f"JOIN toolbridge_calls AS c ON {KEY}",
            key_columns(keys),
        )
        found: dict[CallKey, tuple[JournalEntry | JournalError, int | None]] = {}
        for row in await cursor.fetchall():
            try:
                entry: JournalEntry | JournalError = JSONB.entry(row)
            except JournalError as exc:
                entry = exc
            found[CallKey(row[0], row[1], row[2])] = (entry, row[-1])
        return found

    async def _alive(self, owners: set[int]) -> set[int]:
        """The owners among `owners` whose journal is open: their lock cannot be taken
        (taken for the statement only when it can, so a dead owner stays free)."""
        if not owners:
            return set()
        cursor = await self._conn.execute(
            "SELECT o FROM unnest(%b::bigint[]) AS u(o) WHERE NOT pg_try_advisory_xact_lock(o)",
            (sorted(owners),),
        )
        return {row[0] for row in await cursor.fetchall()}

    async def _take_over(
        self, key: CallKey, owner: int | None, state: str = "running", queued: bool = True
    ) -> JournalEntry | None:
        """Own a call in `state` whose owner is gone, unless another process did it first;
        a queued one is marked running unless it is `queued` again."""
        start = "" if state == "running" or queued else ", state = 'running', started_at = %s"
        cursor = await self._conn.execute(
            f"UPDATE toolbridge_calls SET owner = %s{start} WHERE session = %s AND "
            "call_id = %s AND args_hash = %s AND state = %s AND owner IS NOT DISTINCT FROM %s "
            f"RETURNING {COLUMNS}",
            (self._owner, *([time.time()] if start else []), *key, state, owner),
        )
        row = await cursor.fetchone()
        if row is None:
            return None
        self._held.add(key)
        return JSONB.entry(row)

    def _write_params(
        self,
        calls: list[NewCall],
        starting: list[Job[Start]],
        owned: list[Job[Finish]],
        now: float,
    ) -> dict[str, Any]:
        """The parameters of `write_sql`: each column an array, built in one pass."""
        params: dict[str, Any] = {"now": now, "owner": self._owner}
        if calls:
            sessions, ids, digests, tools, texts, approvals, states = _columns(7)
            for op in calls:
                key = op.key
                sessions.append(key.session)
                ids.append(key.call_id)
                digests.append(key.args_hash)
                tools.append(op.tool)
                texts.append(op.arguments_text)
                approvals.append(op.approval_text)
                states.append(claimed_state(op.queued))
            params.update(
                s=text_array(sessions), c=text_array(ids), h=text_array(digests),
                t=text_array(tools), a=text_array(texts), p=text_array(approvals),
                q=text_array(states),
            )  # fmt: skip
        if starting:
            params.update(key_columns([job.op.key for job in starting], "s"))
        if owned:
            sessions, ids, digests, outcomes, kinds = _columns(5)
            for done in owned:
                finish = done.op
                key = finish.key
                sessions.append(key.session)
                ids.append(key.call_id)
                digests.append(key.args_hash)
                outcomes.append(finish.outcome_text)
                kinds.append(finish.error_kind)
            params.update(
                fs=text_array(sessions), fc=text_array(ids), fh=text_array(digests),
                fo=text_array(outcomes), fe=text_array(kinds),
            )  # fmt: skip
        return params

    async def _finished(self, owned: list[Job[Finish]], count: int, now: float) -> set[CallKey]:
        """Let go of the calls whose outcome the batch stored: all of them when `count`
        says so, else those the rows of this batch's time show finished."""
        if count == len(owned):
            done = {job.op.key for job in owned}
        else:  # a repeat, or a row another process took: which ones are stored?
            cursor = await self._conn.execute(
                f"SELECT c.session, c.call_id, c.args_hash FROM {KEYS} AS u(s, c, h) "
                f"JOIN toolbridge_calls AS c ON {KEY} WHERE {kept(_STORED_NOW)}",
                {"now": now, **key_columns([job.op.key for job in owned])},
            )
            done = {CallKey(*row) for row in await cursor.fetchall()}
        self._held -= done
        return done

    async def _release(self, op: Release) -> None:
        """Let go of owned calls: they stay running without an owner (so are found
        interrupted), or, for claims nobody heard, their new rows go."""
        keys = [key for key in dict.fromkeys(op.keys) if key in self._held]
        self._held.difference_update(keys)
        if not keys:
            return
        await self._conn.execute(
            f"{_LET_GO[op.how]} {KEYS} AS u(s, c, h) WHERE {KEY} AND {kept(_HELD)}",
            {"owner": self._owner, **key_columns(keys)},
        )


def _calls(op: Operation) -> list[CallKey]:
    """The calls `op` concerns (none: a query)."""
    if isinstance(op, Release):
        return op.keys
    if isinstance(op, Claims):
        return [call.key for call in op.calls]
    return [op.key] if isinstance(op, Start | Finish) else []


def _columns(count: int) -> tuple[list[Any], ...]:
    """`count` new lists, one per column."""
    return tuple([] for _ in range(count))


def _ran(op: NewCall, now: float) -> Claim:
    """The answer of a claim whose row the batch inserted: it runs the call, first attempt."""
    entry = running_entry(op.key, op.tool, op.arguments, op.approval, now, queued=op.queued)
    return Claim(ClaimAction.RUN, entry)
