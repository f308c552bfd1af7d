"""The PostgreSQL journal's writer task: operations queued on one connection and applied
batch by batch, the claims, starts and finishes of a batch in one statement.

A batch gathers what a few turns of the event loop bring; its claims, starts and finishes
go as one statement (`postgres_sql.write_sql`), answered by two counts, and only a claim
that met a stored call reads rows (replay, busy, or take it over). A failure is the answer
of the operations it concerns, never of the writer; a claim nobody heard is undone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolbridge.journal.base import deliver
from toolbridge.journal.claims import (
    LetGo,
    claim_action,
    claimed_state,
    not_owned,
    running_entry,
    unheard,
)
from toolbridge.journal.postgres_connection import server_error
from toolbridge.journal.postgres_sql import KEY, KEYS, key_columns, qualified, write_sql
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

__all__ = ["BatchWriter", "Finish", "Job", "Query", "Release", "Start"]

logger = logging.getLogger(__name__)

_GATHER_TURNS = 16  # at most this many turns of the loop gather one batch

Query = Callable[["AsyncConnection[Any]"], Awaitable[Any]]
"""An operation run on its own: a function of the connection."""


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


_WRITES = (NewCall, Start, Finish)  # the operations a batch sends as one statement

_LET_GO = {
    LetGo.DELETE: "DELETE FROM toolbridge_calls AS c USING",
    LetGo.REQUEUE: "UPDATE toolbridge_calls AS c SET owner = NULL, state = 'queued', "
    "started_at = NULL FROM",
    LetGo.DISOWN: "UPDATE toolbridge_calls AS c SET owner = NULL FROM",
}
"""How `_release` lets go of calls (see `LetGo`)."""


@dataclass(slots=True)
class Job:
    """One operation and where its answer goes (None: nobody waits for it)."""

    op: NewCall | Start | Finish | Release | Query
    future: asyncio.Future[Any] | None
    inserted: bool = True
    """Set with the answer: whether a claim that runs the call inserted its row (False:
    it took a queued one), which says how to undo it if its caller never hears it."""


class BatchWriter:
    """The writer of a `PostgresJournal`: its connection, owner number and owned calls,
    and the task that applies queued operations to them."""

    def __init__(self, conn: AsyncConnection[Any], *, description: str, owner: int) -> None:
        self._conn = conn
        self._description = description
        self._owner = owner
        self._held: set[CallKey] = set()
        self._last_now = 0.0  # see `_now`
        self._from_queue: set[CallKey] = set()  # claims that took a queued row, until heard
        self._jobs: asyncio.Queue[Job | None] = asyncio.Queue()
        self._writer = asyncio.create_task(self._serve(), name="toolbridge-journal")
        self._closed = False

    async def _submit(self, op: NewCall | Start | Finish | Release | Query) -> Any:
        if self._closed:
            raise journal_closed(f"at {self._description}")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        job = Job(op, future)
        self._jobs.put_nowait(job)
        try:
            return await future
        except asyncio.CancelledError:
            # Stopped just as its answer came (set, so `_settle` delivered it): nobody acts
            # on the claim, so it is undone as `_settle` would have (its new row deleted, a
            # queued row it took queued again).
            heard = future.done() and not future.cancelled() and future.exception() is None
            claim = future.result() if heard else None
            if isinstance(claim, Claim) and not self._closed:
                how = unheard(claim, inserted=job.inserted)
                if how is not None:
                    self._jobs.put_nowait(Job(Release([claim.entry.key], how), None))
            raise

    async def _serve(self) -> None:
        """Apply queued jobs batch by batch until `close` queues the end."""
        while (first := await self._jobs.get()) is not None:
            # Let the calls scheduled with this one queue theirs too: one batch, not two.
            # While each turn of the loop brings more (the calls of a batch finishing one
            # after another), wait one more turn: a round trip costs more than a turn.
            waiting = -1
            for _ in range(_GATHER_TURNS):
                if self._jobs.qsize() == waiting:
                    break
                waiting = self._jobs.qsize()
                await asyncio.sleep(0)
            jobs = [first]
            stop = False
            while not self._jobs.empty():
                job = self._jobs.get_nowait()
                if job is None:
                    stop = True
                    break
                jobs.append(job)
            await self._run_batch(jobs)
            if stop:
                break

    async def _run_batch(self, jobs: list[Job]) -> None:
        """Claims, starts and finishes in one statement, the rest one by one; a failure is
        the answer of the jobs it concerns, never of the writer."""
        writes = [(i, job.op) for i, job in enumerate(jobs) if isinstance(job.op, _WRITES)]
        results: dict[int, tuple[bool, Any]] = {}
        if writes:
            await self._step(results, [i for i, _ in writes], self._write, [op for _, op in writes])
        for index, job in enumerate(jobs):
            op = job.op
            if isinstance(op, Release):
                await self._step(results, [index], self._release, op)
            elif not isinstance(op, NewCall | Start | Finish):
                await self._step(results, [index], op, self._conn)
        for index, job in enumerate(jobs):
            if job.future is not None:
                ok, value = results[index]
                self._settle(job, ok, value)

    async def _step(
        self,
        results: dict[int, tuple[bool, Any]],
        indices: list[int],
        work: Callable[[Any], Awaitable[Any]],
        argument: Any,
    ) -> None:
        """Run `work` for the jobs at `indices`: a list answers each, anything else all."""
        import psycopg

        try:
            answer = await work(argument)
        except (psycopg.Error, ValueError, TypeError) as exc:
            error = server_error(exc, self._description)
            results.update((index, (False, error)) for index in indices)
        except JournalError as exc:  # refused before it wrote anything
            results.update((index, (False, exc)) for index in indices)
        else:
            answers = answer if isinstance(argument, list) else [answer] * len(indices)
            for index, value in zip(indices, answers, strict=True):
                failed = isinstance(value, JournalError)
                results[index] = (not failed, value)

    def _settle(self, job: Job, ok: bool, value: Any) -> None:
        assert job.future is not None
        from_queue = False
        if ok and isinstance(value, Claim) and value.entry.key in self._from_queue:
            self._from_queue.discard(value.entry.key)
            from_queue = True
            job.inserted = False
        if (
            not deliver(job.future, ok, value)
            and ok
            and isinstance(value, Claim)
            and not self._closed
            and (how := unheard(value, inserted=not from_queue)) is not None
        ):  # nobody heard the answer, so the call never ran: undo the claim
            self._jobs.put_nowait(Job(Release([value.entry.key], how), None))

    def _now(self) -> float:
        """The time of a batch, distinct from every earlier batch's of this journal: rows a
        statement wrote are told apart by it (with the owner) without ``RETURNING``."""
        now = max(time.time(), self._last_now + 1e-6)
        self._last_now = now
        return now

    async def _write(self, ops: list[NewCall | Start | Finish]) -> list[Any]:
        """The claims, starts and finishes of a batch in one statement (`write_sql`), the
        answers in their order. Its counts say whether every claim went in and every
        outcome was stored (the common case); only otherwise are rows read. If it fails
        and held more than one kind, each kind is sent again on its own, so a failure is
        the answer of the operations it concerns (the failed statement changed nothing)."""
        claims = [op for op in ops if isinstance(op, NewCall)]
        starts = [op for op in ops if isinstance(op, Start)]
        finishes = [op for op in ops if isinstance(op, Finish)]
        groups = [group for group in (claims, starts, finishes) if group]
        try:
            answers = await self._write_once(claims, starts, finishes)
        except _Unsent as unsent:
            if len(groups) == 1:
                raise unsent.error from None
            logger.info("journal %s: a batch failed as one (%s); its parts go on their own",
                        self._description, unsent.error)  # fmt: skip
            answers = {}
            parts: list[tuple[list[NewCall], list[Start], list[Finish]]] = [
                (claims, [], []), ([], starts, []), ([], [], finishes)]  # fmt: skip
            for part in parts:
                group: list[Any] = [*part[0], *part[1], *part[2]]
                if not group:
                    continue
                try:
                    answers.update(await self._write_once(*part))
                except _Unsent as alone:
                    failed = server_error(alone.error, self._description)
                    answers.update((id(op), failed) for op in group)
        return [answers[id(op)] for op in ops]

    async def _write_once(
        self, claims: list[NewCall], starts: list[Start], finishes: list[Finish]
    ) -> dict[int, Any]:
        """`_write` as one statement: the answers by `id` of each operation; `_Unsent`
        when the statement itself failed (so it changed nothing)."""
        import psycopg

        held = self._held
        now = self._now()
        starting = [op.key for op in starts if op.key in held]
        owned = [op for op in finishes if op.key in held]
        params = self._write_params(claims, starting, owned, now)
        answers: dict[int, Any] = {}
        done: set[CallKey] = set()
        if claims or starting or owned:
            sql = write_sql(claims=bool(claims), starts=bool(starting), finishes=bool(owned))
            try:
                cursor = await self._conn.execute(sql, params)
                row = await cursor.fetchone()
            except (psycopg.Error, ValueError, TypeError) as exc:
                raise _Unsent(exc) from None
            claimed, finished = (int(row[0]), int(row[1])) if row is not None else (-1, -1)
            if owned:  # stored: a failure to read which ones is the error of these alone
                try:
                    done = await self._finished(owned, finished, now)
                except psycopg.Error as exc:
                    failed = server_error(exc, self._description)
                    answers.update((id(finish), failed) for finish in owned)
            if claims and claimed == len(claims):  # every claim inserted (no key twice)
                for op in claims:
                    held.add(op.key)
                    entry = running_entry(op.key, op.tool, op.arguments, op.approval, now,
                                          queued=op.queued)  # fmt: skip
                    answers[id(op)] = Claim(ClaimAction.RUN, entry)
            elif claims:
                try:
                    contested: list[Any] = await self._contested(claims, now)
                except psycopg.Error as exc:
                    contested = [server_error(exc, self._description)] * len(claims)
                answers.update(zip(map(id, claims), contested, strict=True))
        for start in starts:
            answers[id(start)] = None if start.key in held else not_owned(start.key)
        for finish in finishes:
            if id(finish) not in answers:
                answers[id(finish)] = None if finish.key in done else not_owned(finish.key)
        return answers

    async def _contested(self, ops: list[NewCall], now: float) -> list[Claim | JournalError]:
        """Claims some of which met a stored call: the rows this batch inserted (this
        journal's owner and this batch's time) run; of the others, replay, busy (a live
        owner runs it), or take over an interrupted one (its owner died, or let go of it);
        a record that cannot be read is the error of its own claim."""
        rows = await self._owned_rows([op.key for op in ops])
        owners = {owner for _, owner in rows.values() if owner not in (None, self._owner)}
        alive = await self._alive(owners)
        answers: list[Claim | JournalError] = []
        for op in ops:
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
                answers.append(
                    Claim(
                        ClaimAction.RUN,
                        running_entry(
                            op.key, op.tool, op.arguments, op.approval, now, queued=op.queued
                        ),
                    )
                )
            elif (
                action := claim_action(entry, owner, held=self._held, alive=alive.__contains__)
            ) in (ClaimAction.REPLAY, ClaimAction.BUSY):
                answers.append(Claim(action, entry))
            elif action is ClaimAction.RUN:  # it was queued, never started: same attempt
                taken = await self._take_over(op.key, owner, "queued", op.queued)
                if taken is not None:
                    self._from_queue.add(op.key)  # an unheard claim queues it again
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
        self, claims: list[NewCall], starting: list[CallKey], owned: list[Finish], now: float
    ) -> dict[str, Any]:
        """The parameters of `write_sql`: each column an array, built in one pass."""
        params: dict[str, Any] = {"now": now, "owner": self._owner}
        if claims:
            sessions, ids, digests, tools, texts, approvals, states = _columns(7)
            for op in claims:
                key = op.key
                sessions.append(key.session)
                ids.append(key.call_id)
                digests.append(key.args_hash)
                tools.append(op.tool)
                texts.append(op.arguments_text)
                approvals.append(op.approval_text)
                states.append(claimed_state(op.queued))
            params.update(s=sessions, c=ids, h=digests, t=tools, a=texts, p=approvals, q=states)
        if starting:
            params.update(key_columns(starting, "s"))
        if owned:
            params.update(key_columns([op.key for op in owned], "f"))
            params.update(fo=[op.outcome_text for op in owned], fe=[op.error_kind for op in owned])
        return params

    async def _finished(self, owned: list[Finish], count: int, now: float) -> set[CallKey]:
        """Let go of the calls whose outcome the batch stored: all of them when `count`
        says so, else those the rows of this batch's time show finished."""
        if count == len(owned):
            done = {op.key for op in owned}
        else:  # a repeat, or a row another process took: which ones are stored?
            cursor = await self._conn.execute(
                f"SELECT c.session, c.call_id, c.args_hash FROM {KEYS} AS u(s, c, h) "
                f"JOIN toolbridge_calls AS c ON {KEY} WHERE c.state = 'finished' "
                "AND c.finished_at = %(now)s",
                {"now": now, **key_columns([op.key for op in owned])},
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
            f"{_LET_GO[op.how]} {KEYS} AS u(s, c, h) WHERE {KEY} AND c.owner = %(owner)s "
            "AND c.state IN ('queued', 'running')",
            {"owner": self._owner, **key_columns(keys)},
        )


def _columns(count: int) -> tuple[list[Any], ...]:
    """`count` new lists, one per column."""
    return tuple([] for _ in range(count))
