"""The shared journal: PostgreSQL through psycopg 3, for many processes or hosts.

Operations queue up and a writer task applies them set-based: the claims and finishes
one turn of the event loop brings are one statement (`write_sql`: an
``INSERT ... SELECT FROM unnest`` and an ``UPDATE ... FROM unnest``, one transaction,
answering only two counts), so a batch of 200 calls costs two round trips; the starts of
calls that waited for a slot go first, in a statement of their own. Ownership of a
running call is its row's ``owner``: a random number this journal holds a session-level
advisory lock on for as long as it is open. The server drops the lock when the process
dies (its socket closes) or, over TCP, when keepalives find its host gone (set to about
25 s for this connection, not the system's two hours), so a running call whose owner
holds no lock is known to be interrupted; one lock per journal, not one per call, so
batches of any size fit the server's lock table.

Connecting is `postgres_connection`'s job, the writer task `postgres_writer`'s and the
batch statement `postgres_sql`'s; what a row holds, what a claim gets and which migrations
are due are shared with the SQLite journal (`rows`, `claims`, `migrations`). This module
keeps the journal's operations and their SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolbridge.journal.base import CallJournal, Durability, check_limit, dropped_sessions
from toolbridge.journal.claims import (
    LetGo,
    claimed_state,
    not_owned,
    proven,
    started_at,
)
from toolbridge.journal.postgres_connection import open_connection
from toolbridge.journal.postgres_writer import (
    BatchWriter,
    Claims,
    Finish,
    Job,
    Release,
    Start,
)
from toolbridge.journal.records import (
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    ClaimRequest,
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
    page_condition,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresJournal"]

_SESSION_LOCKS = 0x746F6F6C  # 'tool': the (int, int) advisory locks of held sessions


class PostgresJournal(BatchWriter, CallJournal):
    """A journal in a PostgreSQL database; open it with ``await PostgresJournal.connect(url)``."""

    close_limit: float = 10.0
    """Seconds `close` waits for the server to answer what is left, before hanging up; and
    a stopped run for the writes it waits for, all in one bound
    (`CallRecorder.while_stopping`)."""

    def __init__(self, conn: AsyncConnection[Any], *, description: str, owner: int) -> None:
        super().__init__(conn, description=description, owner=owner)
        self._sessions: set[str] = set()  # runs held by `hold_session`
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
        (answer,) = await self._submit(Claims([call]))
        if isinstance(answer, JournalError):
            raise answer
        result: Claim = answer
        return result

    async def claim_many(self, calls: Sequence[ClaimRequest]) -> list[Claim | JournalError]:
        failed: dict[int, JournalError] = {}  # a call's own (a key or value not storable)
        asked: list[NewCall] = []
        for place, call in enumerate(calls):
            try:
                asked.append(
                    JSONB.new_call(
                        *call[:4], queued=call.queued, arguments_text=call.arguments_text
                    )
                )
            except JournalError as exc:
                failed[place] = exc
        claims: list[Claim | JournalError] = []
        if asked:
            job = self._submit_soon(Claims(asked))  # a closed journal raises here
            try:
                claims = await self._answer_of(job)
            except JournalError as exc:  # the batch's statement failed: each call's answer
                claims = [exc] * len(asked)
        if not failed:
            return claims
        answers = iter(claims)
        return [failed[place] if place in failed else next(answers) for place in range(len(calls))]

    async def start(self, key: CallKey) -> None:
        error = await self._submit(Start(key))
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
        await self.finish_soon(key, outcome, error_kind=error_kind)

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        # `_submit_soon` inlined: a call's outcome is the journal's most frequent job
        if self._closed:
            raise journal_closed(f"at {self._description}")
        future: asyncio.Future[None] = self._loop.create_future()
        self._jobs.append(Job(Finish(key, JSONB.dumps(outcome), error_kind), future))
        if self._idle is not None:
            self._wake()
        return future

    async def abandon(self, key: CallKey) -> None:
        await self._submit(Release([key]))

    async def unclaim(self, key: CallKey) -> None:
        await self._submit(Release([key], LetGo.REQUEUE))

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
        # The session's condition only when there is one: a prepared statement's generic
        # plan of "%(s)s IS NULL OR session = %(s)s" could not seek the session's index.
        conditions: list[str] = []
        params: list[Any] = []
        if session is not None:
            conditions.append("session = %s")
            params.append(session)
        if after is not None:
            columns, values = page_condition(session, after)
            conditions.append(f"({columns}) > ({', '.join(['%s'] * len(values))})")
            params += values
        where = f"WHERE {' AND '.join(conditions)} " if conditions else ""

        async def op(conn: AsyncConnection[Any]) -> list[JournalEntry]:
            cursor = await conn.execute(
                f"SELECT {COLUMNS}, owner FROM toolbridge_calls {where}"
                f"ORDER BY {LISTING_ORDER} LIMIT %s",
                (*params, limit),
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

        self._queue(Job(op, None))  # if it fails, the lock goes with the connection

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
        """Apply what is queued, let go of the owned calls and disconnect. A server that
        does not answer within `close_limit` seconds is hung up on: what still waits for
        it fails with a `JournalError` that says so (logged too), and the close ends."""
        if self._closed:
            return
        limit = self.close_limit
        unanswered = JournalError(
            f"the journal at {self._description} did not answer within {limit:g} s while "
            "closing, so its connection was dropped: what it had not answered may not be "
            "recorded (what was sent may still be, when the server goes on), and the calls "
            "this journal held read as interrupted once the server notices. Check that the "
            "server is up and not overloaded."
        )
        deadline = asyncio.get_running_loop().call_later(limit, self._hang_up, unanswered)
        try:
            await self._stop()
            import psycopg

            # Owned calls are interrupted from now on, not once the server has seen the
            # close (a broken connection holds nothing: the server drops its locks with it).
            with contextlib.suppress(psycopg.Error):
                await self._conn.execute("SELECT pg_advisory_unlock_all()")
        finally:
            deadline.cancel()
            await self._conn.close()  # the server drops the owner lock: calls interrupted
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


def _int4(session: str) -> int:
    """The session's lock number as PostgreSQL's signed int4 (the second lock key)."""
    return (session_lock_number(session) & 0xFFFFFFFF) - (1 << 31)
