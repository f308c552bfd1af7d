"""The shared journal: PostgreSQL through psycopg 3, for many processes or hosts.

Operations queue up and a writer task applies them set-based: the claims, starts and
finishes one turn of the event loop brings are one statement (`write_sql`: an
``INSERT ... SELECT FROM unnest`` and two ``UPDATE ... FROM unnest``, one transaction,
answering only two counts), so a batch of 200 calls costs two round trips. Ownership of a
running call is its row's ``owner``: a random number this journal holds a session-level
advisory lock on for as long as it is open. The server drops the lock when the process
dies (its socket closes) or, over TCP, when keepalives find its host gone (set to about
25 s for this connection, not the system's two hours), so a running call whose owner
holds no lock is known to be interrupted; one lock per journal, not one per call, so
batches of any size fit the server's lock table.

Connecting is `postgres_connection`'s job and the batch statement `postgres_sql`'s; what a
row holds, what a claim gets and which migrations are due are shared with the SQLite
journal (`rows`, `claims`, `migrations`). This module keeps the writer task and its SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolbridge.journal.base import CallJournal, Durability, check_limit, deliver, dropped_sessions
from toolbridge.journal.claims import (
    LetGo,
    claim_action,
    claimed_state,
    not_owned,
    proven,
    running_entry,
    started_at,
    unheard,
)
from toolbridge.journal.postgres_connection import open_connection, server_error
from toolbridge.journal.postgres_sql import KEY, KEYS, key_columns, qualified, write_sql
from toolbridge.journal.records import (
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    JournalEntry,
    JournalError,
    journal_closed,
    session_in_use,
    session_lock_number,
)
from toolbridge.journal.rows import (
    COLUMNS,
    JSONB,
    LISTING_ORDER,
    SESSIONS_QUERY,
    NewCall,
    page_after,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresJournal"]

logger = logging.getLogger(__name__)

_SESSION_LOCKS = 0x746F6F6C  # 'tool': the (int, int) advisory locks of held sessions

_GATHER_TURNS = 16  # at most this many turns of the loop gather one batch

Query = Callable[["AsyncConnection[Any]"], Awaitable[Any]]


@dataclass(slots=True)
class _Start:
    key: CallKey


@dataclass(slots=True)
class _Finish:
    key: CallKey
    outcome_text: str
    error_kind: str | None


@dataclass(slots=True)
class _Release:
    """Let go of owned calls, as `how` says (see `LetGo`)."""

    keys: list[CallKey]
    how: LetGo = LetGo.DISOWN


class _Unsent(Exception):
    """The statement of a batch failed: nothing of it was written."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


_WRITES = (NewCall, _Start, _Finish)  # the operations a batch sends as one statement

_LET_GO = {
    LetGo.DELETE: "DELETE FROM toolbridge_calls AS c USING",
    LetGo.REQUEUE: "UPDATE toolbridge_calls AS c SET owner = NULL, state = 'queued', "
    "started_at = NULL FROM",
    LetGo.DISOWN: "UPDATE toolbridge_calls AS c SET owner = NULL FROM",
}
"""How `_release` lets go of calls (see `LetGo`)."""


@dataclass(slots=True)
class _Job:
    op: NewCall | _Start | _Finish | _Release | Query
    future: asyncio.Future[Any] | None


class PostgresJournal(CallJournal):
    """A journal in a PostgreSQL database; open it with ``await PostgresJournal.connect(url)``."""

    def __init__(self, conn: AsyncConnection[Any], *, description: str, owner: int) -> None:
        self._conn = conn
        self._description = description
        self._owner = owner
        self._held: set[CallKey] = set()
        self._last_now = 0.0  # see `_now`
        self._from_queue: set[CallKey] = set()  # claims that took a queued row, until heard
        self._sessions: set[str] = set()  # runs held by `hold_session`
        self._jobs: asyncio.Queue[_Job | None] = asyncio.Queue()
        self._writer = asyncio.create_task(self._serve(), name="toolbridge-journal")
        self._closed = False
        _OPEN_JOURNALS.add(self)

    @classmethod
    async def connect(
        cls, conninfo: str, *, durability: Durability = "process", create: bool = True
    ) -> PostgresJournal:
        """Connect, create or migrate the tables, take an owner number, start the writer.

        `create` False opens an existing journal only (to read or prune it): a database
        that holds none is a `JournalError`, and nothing is created in it."""
        conn, description, owner = await open_connection(
            conninfo, durability=durability, create=create
        )
        return cls(conn, description=description, owner=owner)

    # --- the writer task -----------------------------------------------------------------

    async def _submit(self, op: NewCall | _Start | _Finish | _Release | Query) -> Any:
        if self._closed:
            raise journal_closed(f"at {self._description}")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._jobs.put_nowait(_Job(op, future))
        return await future

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

    async def _run_batch(self, jobs: list[_Job]) -> None:
        """Claims, starts and finishes in one statement, the rest one by one; a failure is
        the answer of the jobs it concerns, never of the writer."""
        writes = [(i, job.op) for i, job in enumerate(jobs) if isinstance(job.op, _WRITES)]
        results: dict[int, tuple[bool, Any]] = {}
        if writes:
            await self._step(results, [i for i, _ in writes], self._write, [op for _, op in writes])
        for index, job in enumerate(jobs):
            op = job.op
            if isinstance(op, _Release):
                await self._step(results, [index], self._release, op)
            elif not isinstance(op, NewCall | _Start | _Finish):
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

    def _settle(self, job: _Job, ok: bool, value: Any) -> None:
        assert job.future is not None
        from_queue = False
        if ok and isinstance(value, Claim) and value.entry.key in self._from_queue:
            self._from_queue.discard(value.entry.key)
            from_queue = True
        if (
            not deliver(job.future, ok, value)
            and ok
            and isinstance(value, Claim)
            and not self._closed
            and (how := unheard(value, inserted=not from_queue)) is not None
        ):  # nobody heard the answer, so the call never ran: undo the claim
            self._jobs.put_nowait(_Job(_Release([value.entry.key], how), None))

    def _now(self) -> float:
        """The time of a batch, distinct from every earlier batch's of this journal: rows a
        statement wrote are told apart by it (with the owner) without ``RETURNING``."""
        now = max(time.time(), self._last_now + 1e-6)
        self._last_now = now
        return now

    async def _write(self, ops: list[NewCall | _Start | _Finish]) -> list[Any]:
        """The claims, starts and finishes of a batch in one statement (`write_sql`), the
        answers in their order. Its counts say whether every claim went in and every
        outcome was stored (the common case); only otherwise are rows read. If it fails
        and held more than one kind, each kind is sent again on its own, so a failure is
        the answer of the operations it concerns (the failed statement changed nothing)."""
        claims = [op for op in ops if isinstance(op, NewCall)]
        starts = [op for op in ops if isinstance(op, _Start)]
        finishes = [op for op in ops if isinstance(op, _Finish)]
        groups = [group for group in (claims, starts, finishes) if group]
        try:
            answers = await self._write_once(claims, starts, finishes)
        except _Unsent as unsent:
            if len(groups) == 1:
                raise unsent.error from None
            logger.info("journal %s: a batch failed as one (%s); its parts go on their own",
                        self._description, unsent.error)  # fmt: skip
            answers = {}
            parts: list[tuple[list[NewCall], list[_Start], list[_Finish]]] = [
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
        self, claims: list[NewCall], starts: list[_Start], finishes: list[_Finish]
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
        self, claims: list[NewCall], starting: list[CallKey], owned: list[_Finish], now: float
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

    async def _finished(self, owned: list[_Finish], count: int, now: float) -> set[CallKey]:
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

    async def _release(self, op: _Release) -> None:
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

    # --- operations ------------------------------------------------------------------------

    async def claim(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> Claim:
        call = JSONB.new_call(key, tool, arguments, approval, queued=queued)
        result: Claim = await self._submit(call)
        return result

    async def start(self, key: CallKey) -> None:
        error = await self._submit(_Start(key))
        assert error is None

    async def restart(self, key: CallKey, *, queued: bool = False) -> JournalEntry:
        async def op(conn: AsyncConnection[Any]) -> JournalEntry:
            if key not in self._held:
                raise not_owned(key)
            cursor = await conn.execute(
                "UPDATE toolbridge_calls SET attempt = attempt + 1, state = %s, started_at = %s "
                "WHERE session = %s AND call_id = %s AND args_hash = %s AND owner = %s "
                f"RETURNING {COLUMNS}",
                (claimed_state(queued), started_at(queued, time.time()), *key, self._owner),
            )  # fmt: skip
            row = await cursor.fetchone()
            if row is None:
                raise not_owned(key)
            return JSONB.entry(row)

        result: JournalEntry = await self._submit(op)
        return result

    async def retry(
        self,
        key: CallKey,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> JournalEntry | None:
        approval_text = JSONB.approval(approval)

        async def op(conn: AsyncConnection[Any]) -> Claim | None:
            if key in self._held:
                return None
            # One statement: of two processes retrying at once, the row lock lets one win.
            cursor = await conn.execute(
                "UPDATE toolbridge_calls SET state = %s, attempt = attempt + 1, "
                "outcome = NULL, error_kind = NULL, approval = %s::jsonb, started_at = %s, "
                "finished_at = NULL, owner = %s WHERE session = %s AND call_id = %s "
                "AND args_hash = %s AND state = 'finished' AND error_kind = 'interrupted' "
                f"RETURNING {COLUMNS}",
                (
                    claimed_state(queued),
                    approval_text,
                    started_at(queued, time.time()),
                    self._owner,
                    key.session,
                    key.call_id,
                    key.args_hash,
                ),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            self._held.add(key)
            # An owned, interrupted claim: if nobody hears it, `_settle` lets it go (running).
            return Claim(ClaimAction.INTERRUPTED, JSONB.entry(row))

        claim: Claim | None = await self._submit(op)
        return claim.entry if claim is not None else None

    async def finish(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> None:
        error = await self._submit(_Finish(key, JSONB.dumps(outcome), error_kind))
        assert error is None

    async def abandon(self, key: CallKey) -> None:
        await self._submit(_Release([key]))

    async def refuse(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        outcome: Mapping[str, Any],
        *,
        error_kind: str | None,
    ) -> None:
        texts = JSONB.refusal(key, tool, arguments, outcome)

        async def op(conn: AsyncConnection[Any]) -> None:
            now = time.time()
            await conn.execute(
                f"INSERT INTO toolbridge_calls ({COLUMNS}) VALUES (%s, %s, %s, %s, %s::jsonb, "
                "'refused', 0, %s::jsonb, %s, NULL, %s, NULL, %s)",
                (*key, tool, texts[0], texts[1], error_kind, now, now),
            )

        await self._submit(op)

    async def _seen(self, rows: list[Any]) -> list[JournalEntry]:
        """Entries of rows with their owner (last), as a reader can prove them: a running
        call whose owner's lock is gone (and not this journal's) is interrupted."""
        entries = [JSONB.entry(row) for row in rows]
        owners = {
            row[-1]
            for row, entry in zip(rows, entries, strict=True)
            if entry.state is CallState.RUNNING and row[-1] not in (None, self._owner)
        }
        alive = await self._alive(owners)
        return [
            proven(entry, row[-1], held=self._held, alive=alive.__contains__)
            for row, entry in zip(rows, entries, strict=True)
        ]

    async def entry(self, key: CallKey) -> JournalEntry | None:
        async def op(conn: AsyncConnection[Any]) -> JournalEntry | None:
            cursor = await conn.execute(
                f"SELECT {COLUMNS}, owner FROM toolbridge_calls "
                "WHERE session = %s AND call_id = %s AND args_hash = %s",
                (key.session, key.call_id, key.args_hash),
            )
            row = await cursor.fetchone()
            return (await self._seen([row]))[0] if row is not None else None

        result: JournalEntry | None = await self._submit(op)
        return result

    async def entries(
        self,
        *,
        session: str | None = None,
        limit: int | None = None,
        after: JournalEntry | None = None,
    ) -> list[JournalEntry]:
        check_limit(limit)
        page = "" if after is None else f"AND ({LISTING_ORDER}) > (%(t)s, %(as)s, %(ac)s, %(ah)s) "
        params: dict[str, Any] = {"s": session, "n": limit}
        if after is not None:
            params.update(zip(("t", "as", "ac", "ah"), page_after(after), strict=True))

        async def op(conn: AsyncConnection[Any]) -> list[JournalEntry]:
            cursor = await conn.execute(
                f"SELECT {COLUMNS}, owner FROM toolbridge_calls "
                f"WHERE (%(s)s::text IS NULL OR session = %(s)s) {page}"
                f"ORDER BY {LISTING_ORDER} LIMIT %(n)s",
                params,
            )
            return await self._seen(await cursor.fetchall())

        result: list[JournalEntry] = await self._submit(op)
        return result

    async def counts(self) -> dict[str, int]:
        async def op(conn: AsyncConnection[Any]) -> dict[str, int]:
            cursor = await conn.execute(
                "SELECT session, COUNT(*) FROM toolbridge_calls GROUP BY session"
            )
            return {str(name): int(count) for name, count in await cursor.fetchall()}

        result: dict[str, int] = await self._submit(op)
        return result

    async def hold_session(self, session: str) -> None:
        if session in self._sessions:
            raise session_in_use(session)
        self._sessions.add(session)  # before the await: a second run here is refused too

        async def op(conn: AsyncConnection[Any]) -> bool:
            cursor = await conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (_SESSION_LOCKS, _int4(session))
            )
            row = await cursor.fetchone()
            return bool(row and row[0])

        try:
            held = await self._submit(op)
        except BaseException:
            self._sessions.discard(session)
            raise
        if not held:
            self._sessions.discard(session)
            raise session_in_use(session)

    def release_session(self, session: str) -> None:
        if session not in self._sessions:
            return
        self._sessions.discard(session)
        if self._closed:
            return  # closing the connection let go of it

        async def op(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                "SELECT pg_advisory_unlock(%s, %s)", (_SESSION_LOCKS, _int4(session))
            )

        self._jobs.put_nowait(_Job(op, None))  # if it fails, the lock goes with the connection

    async def save_run(self, session: str, state: Mapping[str, Any]) -> None:
        text = JSONB.dumps(state)

        async def op(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                "INSERT INTO toolbridge_runs VALUES (%s, %s::jsonb, %s) ON CONFLICT (session) "
                "DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (session, text, time.time()),
            )

        await self._submit(op)

    async def load_run(self, session: str) -> dict[str, Any] | None:
        async def op(conn: AsyncConnection[Any]) -> dict[str, Any] | None:
            cursor = await conn.execute(
                "SELECT state::text FROM toolbridge_runs WHERE session = %s", (session,)
            )
            row = await cursor.fetchone()
            return json.loads(row[0]) if row is not None else None

        result: dict[str, Any] | None = await self._submit(op)
        return result

    async def sessions(self) -> list[tuple[str, float]]:
        async def op(conn: AsyncConnection[Any]) -> list[tuple[str, float]]:
            cursor = await conn.execute(SESSIONS_QUERY)
            return [(str(name), float(when)) for name, when in await cursor.fetchall()]

        result: list[tuple[str, float]] = await self._submit(op)
        return result

    async def prune(
        self, *, older_than: float | None = None, keep_sessions: int | None = None
    ) -> int:
        dropped = await dropped_sessions(self, older_than, keep_sessions)

        async def op(conn: AsyncConnection[Any]) -> int:
            deleted = 0
            if older_than is not None:
                cursor = await conn.execute(
                    "DELETE FROM toolbridge_calls WHERE state IN ('finished', 'refused') "
                    "AND finished_at < %s",
                    (time.time() - older_than,),
                )
                deleted += cursor.rowcount
            if dropped:
                cursor = await conn.execute(
                    "DELETE FROM toolbridge_calls WHERE session = ANY(%s) "
                    "AND state IN ('finished', 'refused')",
                    (dropped,),
                )
                deleted += cursor.rowcount
                await conn.execute(
                    "DELETE FROM toolbridge_runs WHERE session = ANY(%s)", (dropped,)
                )
            return deleted

        result: int = await self._submit(op)
        return result

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._jobs.put_nowait(None)
        await self._writer
        import psycopg

        # Owned calls are interrupted from now on, not once the server has seen the close
        # (a broken connection holds nothing: the server drops its locks with it).
        with contextlib.suppress(psycopg.Error):
            await self._conn.execute("SELECT pg_advisory_unlock_all()")
        await self._conn.close()  # the server drops the owner lock: owned calls are interrupted
        _OPEN_JOURNALS.discard(self)


# Journals open in this process. A child forked without exec (a tool's multiprocessing
# worker) inherits the connection's socket: the server would see the connection, and the
# owner lock, alive for as long as the child lives, and the calls of a killed parent busy
# instead of interrupted. The child points its copy of the socket at /dev/null (the
# number stays taken, so the driver never writes to another file through it).
_OPEN_JOURNALS: weakref.WeakSet[PostgresJournal] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    for journal in list(_OPEN_JOURNALS):
        if journal._conn.closed:  # nothing inherited
            continue
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, journal._conn.pgconn.socket)
        os.close(null)
    _OPEN_JOURNALS.clear()


os.register_at_fork(after_in_child=_forget_connections_in_child)


def _columns(count: int) -> tuple[list[Any], ...]:
    """`count` new lists, one per column."""
    return tuple([] for _ in range(count))


def _int4(session: str) -> int:
    """The session's lock number as PostgreSQL's signed int4 (the second lock key)."""
    return (session_lock_number(session) & 0xFFFFFFFF) - (1 << 31)
