"""The shared journal: PostgreSQL through psycopg 3, for many processes or hosts.

Operations queue up and a writer task applies them in one transaction, set-based: a
batch of 200 claims is three statements (read the rows, try the locks, insert the new
rows), not 600 round trips. Ownership of a running call is a session-level advisory
lock on the journal's connection: the server drops it when the process or its host
dies, so a call found running without an owner is known to be interrupted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolbridge.journal.base import CallJournal, Durability, to_json
from toolbridge.journal.records import (
    COLUMNS,
    SCHEMA_VERSION,
    SESSIONS_QUERY,
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    JournalEntry,
    JournalError,
    entry_from_row,
    interrupted,
    running_entry,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "PostgresJournal"]

logger = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE toolbridge_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE toolbridge_calls (
        session TEXT NOT NULL, call_id TEXT NOT NULL, args_hash TEXT NOT NULL,
        tool TEXT NOT NULL, arguments JSONB NOT NULL, state TEXT NOT NULL,
        attempt INTEGER NOT NULL, outcome JSONB, error_kind TEXT, approval JSONB,
        created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION,
        PRIMARY KEY (session, call_id, args_hash)
    );
    """,
    """
    CREATE TABLE toolbridge_runs (
        session TEXT PRIMARY KEY, state JSONB NOT NULL, updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX toolbridge_calls_by_time ON toolbridge_calls (created_at);
    """,
)
assert len(MIGRATIONS) == SCHEMA_VERSION

_MIGRATION_LOCK = 0x746F6F6C62726467  # 'toolbrdg': one migrating process at a time

Query = Callable[["AsyncConnection[Any]"], Awaitable[Any]]
_OWNING = (ClaimAction.RUN, ClaimAction.INTERRUPTED)


@dataclass(slots=True)
class _Claim:
    key: CallKey
    tool: str
    arguments: Any
    approval: Mapping[str, Any] | None


@dataclass(slots=True)
class _Finish:
    key: CallKey
    outcome: Mapping[str, Any]
    error_kind: str | None


@dataclass(slots=True)
class _Release:
    """Let go of owned calls; `delete` also removes their rows (claims nobody heard)."""

    keys: list[CallKey]
    delete: bool = False


@dataclass(slots=True)
class _Job:
    op: _Claim | _Finish | _Release | Query
    future: asyncio.Future[Any] | None


class PostgresJournal(CallJournal):
    """A journal in a PostgreSQL database; open it with ``await PostgresJournal.connect(url)``."""

    def __init__(self, conn: AsyncConnection[Any], *, description: str) -> None:
        self._conn = conn
        self._description = description
        self._held: set[CallKey] = set()
        self._jobs: asyncio.Queue[_Job | None] = asyncio.Queue()
        self._writer = asyncio.create_task(self._serve(), name="toolbridge-journal")
        self._closed = False

    @classmethod
    async def connect(cls, conninfo: str, *, durability: Durability = "process") -> PostgresJournal:
        """Connect, create or migrate the tables, and start the writer."""
        try:
            import psycopg
        except ImportError:
            raise JournalError(
                "the PostgreSQL journal needs psycopg: pip install 'toolbridge[postgres]'"
            ) from None
        description = _describe(conninfo)
        try:
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise JournalError(f"cannot connect to the journal at {description}: {exc}") from None
        try:
            sync = "on" if durability == "power" else "off"
            await conn.execute(f"SET synchronous_commit = {sync}")
            await _migrate(conn, description)
        except BaseException:
            await conn.close()
            raise
        return cls(conn, description=description)

    # --- the writer task -----------------------------------------------------------------

    async def _submit(self, op: _Claim | _Finish | _Release | Query) -> Any:
        if self._closed:
            raise JournalError(f"the journal at {self._description} is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._jobs.put_nowait(_Job(op, future))
        return await future

    async def _serve(self) -> None:
        """Apply queued jobs batch by batch until `close` queues the end."""
        while (first := await self._jobs.get()) is not None:
            # Let the calls scheduled with this one queue theirs too: one batch, not two.
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
        import psycopg

        results: dict[int, tuple[bool, Any]] = {}
        taken: list[CallKey] = []
        release: list[CallKey] = []
        try:
            async with self._conn.transaction():
                claims = [(i, j.op) for i, j in enumerate(jobs) if isinstance(j.op, _Claim)]
                if claims:
                    answers = await self._claims([op for _, op in claims], taken, release)
                    results.update(
                        (i, (True, a)) for (i, _), a in zip(claims, answers, strict=True)
                    )
                finishes = [(i, j.op) for i, j in enumerate(jobs) if isinstance(j.op, _Finish)]
                if finishes:
                    await self._finishes(finishes, results, release)
                for index, job in enumerate(jobs):
                    if isinstance(job.op, _Release):
                        await self._release_rows(job.op)
                        release.extend(job.op.keys)
                        results[index] = (True, None)
                    elif not isinstance(job.op, _Claim | _Finish):
                        try:
                            results[index] = (True, await job.op(self._conn))
                        except JournalError as exc:  # refused before it wrote anything
                            results[index] = (False, exc)
        except (psycopg.Error, ValueError, TypeError) as exc:
            release = taken
            error = _error(exc, self._description)
            results = {index: (False, error) for index in range(len(jobs))}
        if release:
            await self._unlock(release)
        for index, job in enumerate(jobs):
            if job.future is not None:
                ok, value = results[index]
                self._settle(job, ok, value)

    def _settle(self, job: _Job, ok: bool, value: Any) -> None:
        assert job.future is not None
        if not job.future.cancelled():
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)
        elif ok and isinstance(value, Claim) and value.action in _OWNING and not self._closed:
            # Nobody heard the answer, so the call never ran: undo the claim.
            delete = value.action is ClaimAction.RUN
            self._jobs.put_nowait(_Job(_Release([value.entry.key], delete=delete), None))

    async def _claims(
        self, ops: list[_Claim], taken: list[CallKey], release: list[CallKey]
    ) -> list[Claim]:
        # Lock first, read second: a row read after taking its lock is the truth, since an
        # owner commits before it unlocks. Finished calls need no lock: let go of those.
        locked = await self._try_locks([op.key for op in ops])
        taken.extend(locked)
        rows = await self._rows([op.key for op in ops])
        done = {key for key in locked if _finished(rows.get(key))}
        release.extend(done)
        locked -= done
        now = time.time()
        answers: list[Claim] = []
        fresh: list[_Claim] = []
        for op in ops:
            row = rows.get(op.key)
            if row is not None and row.state is CallState.FINISHED:
                answers.append(Claim(ClaimAction.REPLAY, row))
            elif op.key not in locked:
                answers.append(
                    Claim(
                        ClaimAction.BUSY,
                        row or running_entry(op.key, op.tool, op.arguments, op.approval, now),
                    )
                )
            elif row is not None:
                answers.append(Claim(ClaimAction.INTERRUPTED, row))
            else:
                fresh.append(op)
                answers.append(
                    Claim(
                        ClaimAction.RUN,
                        running_entry(op.key, op.tool, op.arguments, op.approval, now),
                    )
                )
        if fresh:
            await self._conn.execute(
                f"INSERT INTO toolbridge_calls ({COLUMNS}) "
                "SELECT s, c, h, t, a::jsonb, 'running', 1, NULL, NULL, p::jsonb, %(now)s, "
                "%(now)s, NULL FROM unnest(%(s)s::text[], %(c)s::text[], %(h)s::text[], "
                "%(t)s::text[], %(a)s::text[], %(p)s::text[]) AS u(s, c, h, t, a, p)",
                {
                    "now": now,
                    "s": [op.key.session for op in fresh],
                    "c": [op.key.call_id for op in fresh],
                    "h": [op.key.args_hash for op in fresh],
                    "t": [op.tool for op in fresh],
                    "a": [to_json(op.arguments) for op in fresh],
                    "p": [to_json(op.approval) if op.approval else None for op in fresh],
                },
            )
        return answers

    async def _rows(self, keys: list[CallKey]) -> dict[CallKey, JournalEntry]:
        cursor = await self._conn.execute(
            f"SELECT {COLUMNS} FROM toolbridge_calls WHERE (session, call_id, args_hash) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))",
            _columns(keys),
        )
        entries = [entry_from_row(row, _as_is) for row in await cursor.fetchall()]
        return {entry.key: entry for entry in entries}

    async def _try_locks(self, keys: list[CallKey]) -> set[CallKey]:
        candidates = list(dict.fromkeys(key for key in keys if key not in self._held))
        if not candidates:
            return set()
        cursor = await self._conn.execute(
            "SELECT pg_try_advisory_lock(k) FROM unnest(%s::bigint[]) WITH ORDINALITY AS u(k, n) "
            "ORDER BY n",
            ([key.lock_offset for key in candidates],),
        )
        granted = [row[0] for row in await cursor.fetchall()]
        locked = {key for key, ok in zip(candidates, granted, strict=True) if ok}
        self._held |= locked
        return locked

    async def _finishes(
        self,
        finishes: list[tuple[int, _Finish]],
        results: dict[int, tuple[bool, Any]],
        release: list[CallKey],
    ) -> None:
        owned = [(i, op) for i, op in finishes if op.key in self._held]
        for index, op in finishes:
            if op.key not in self._held:
                results[index] = (False, _not_owned(op.key))
        if not owned:
            return
        ops = [op for _, op in owned]
        await self._conn.execute(
            "UPDATE toolbridge_calls AS c SET state = 'finished', outcome = u.o::jsonb, "
            "error_kind = u.e, finished_at = %s FROM unnest(%s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::text[]) AS u(s, c, h, o, e) "
            "WHERE c.session = u.s AND c.call_id = u.c AND c.args_hash = u.h",
            (
                time.time(),
                *_columns([op.key for op in ops]),
                [to_json(op.outcome) for op in ops],
                [op.error_kind for op in ops],
            ),
        )
        release.extend(op.key for op in ops)
        results.update((index, (True, None)) for index, _ in owned)

    async def _release_rows(self, op: _Release) -> None:
        if op.delete:
            await self._conn.execute(
                "DELETE FROM toolbridge_calls WHERE (session, call_id, args_hash) IN "
                "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))",
                _columns(op.keys),
            )

    async def _unlock(self, keys: list[CallKey]) -> None:
        owned = [key for key in dict.fromkeys(keys) if key in self._held]
        self._held.difference_update(owned)
        if owned:
            await self._conn.execute(
                "SELECT pg_advisory_unlock(k) FROM unnest(%s::bigint[]) AS u(k)",
                ([key.lock_offset for key in owned],),
            )

    # --- operations ------------------------------------------------------------------------

    async def claim(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        *,
        approval: Mapping[str, Any] | None = None,
    ) -> Claim:
        result: Claim = await self._submit(_Claim(key, tool, arguments, approval))
        return result

    async def restart(self, key: CallKey) -> JournalEntry:
        async def op(conn: AsyncConnection[Any]) -> JournalEntry:
            if key not in self._held:
                raise _not_owned(key)
            cursor = await conn.execute(
                "UPDATE toolbridge_calls SET attempt = attempt + 1, started_at = %s "
                f"WHERE session = %s AND call_id = %s AND args_hash = %s RETURNING {COLUMNS}",
                (time.time(), key.session, key.call_id, key.args_hash),
            )
            row = await cursor.fetchone()
            assert row is not None  # the call is owned, so its row exists
            return entry_from_row(row, _as_is)

        result: JournalEntry = await self._submit(op)
        return result

    async def retry(
        self, key: CallKey, *, approval: Mapping[str, Any] | None = None
    ) -> JournalEntry | None:
        async def op(conn: AsyncConnection[Any]) -> Claim | None:
            # Lock first, read second, as a claim does: the row read under the lock is the truth.
            if key not in await self._try_locks([key]):
                return None
            if not interrupted((await self._rows([key])).get(key)):
                await self._unlock([key])
                return None
            cursor = await conn.execute(
                "UPDATE toolbridge_calls SET state = 'running', attempt = attempt + 1, "
                "outcome = NULL, error_kind = NULL, approval = %s::jsonb, started_at = %s, "
                "finished_at = NULL WHERE session = %s AND call_id = %s AND args_hash = %s "
                f"RETURNING {COLUMNS}",
                (
                    to_json(approval) if approval else None,
                    time.time(),
                    key.session,
                    key.call_id,
                    key.args_hash,
                ),
            )
            row = await cursor.fetchone()
            assert row is not None  # read under the lock just now
            # An owned, interrupted claim: if nobody hears it, `_settle` lets it go (running).
            return Claim(ClaimAction.INTERRUPTED, entry_from_row(row, _as_is))

        claim: Claim | None = await self._submit(op)
        return claim.entry if claim is not None else None

    async def finish(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> None:
        await self._submit(_Finish(key, outcome, error_kind))

    async def abandon(self, key: CallKey) -> None:
        await self._submit(_Release([key]))

    async def entry(self, key: CallKey) -> JournalEntry | None:
        async def op(conn: AsyncConnection[Any]) -> JournalEntry | None:
            return (await self._rows([key])).get(key)

        result: JournalEntry | None = await self._submit(op)
        return result

    async def entries(
        self, *, session: str | None = None, limit: int | None = None
    ) -> list[JournalEntry]:
        async def op(conn: AsyncConnection[Any]) -> list[JournalEntry]:
            cursor = await conn.execute(
                f"SELECT {COLUMNS} FROM toolbridge_calls "
                "WHERE %(s)s::text IS NULL OR session = %(s)s "
                "ORDER BY created_at, session, call_id LIMIT %(n)s",
                {"s": session, "n": limit},
            )
            return [entry_from_row(row, _as_is) for row in await cursor.fetchall()]

        result: list[JournalEntry] = await self._submit(op)
        return result

    async def save_run(self, session: str, state: Mapping[str, Any]) -> None:
        async def op(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                "INSERT INTO toolbridge_runs VALUES (%s, %s::jsonb, %s) ON CONFLICT (session) "
                "DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (session, to_json(state), time.time()),
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
        sessions = await self.sessions() if keep_sessions is not None else []
        dropped = [name for name, _ in sessions[keep_sessions or 0 :]]

        async def op(conn: AsyncConnection[Any]) -> int:
            deleted = 0
            if older_than is not None:
                cursor = await conn.execute(
                    "DELETE FROM toolbridge_calls WHERE state = 'finished' AND finished_at < %s",
                    (time.time() - older_than,),
                )
                deleted += cursor.rowcount
            if dropped:
                cursor = await conn.execute(
                    "DELETE FROM toolbridge_calls WHERE session = ANY(%s) AND state = 'finished'",
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
        await self._conn.close()  # the server drops this session's advisory locks


async def _migrate(conn: AsyncConnection[Any], description: str) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        cursor = await conn.execute("SELECT to_regclass('toolbridge_meta') IS NOT NULL")
        row = await cursor.fetchone()
        version = 0
        if row is not None and row[0]:
            cursor = await conn.execute(
                "SELECT value FROM toolbridge_meta WHERE key = 'schema_version'"
            )
            found = await cursor.fetchone()
            version = int(found[0]) if found is not None else 1
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"the journal at {description} was written by a newer toolbridge (schema "
                f"version {version}; this one reads up to {SCHEMA_VERSION}). Upgrade toolbridge."
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in (s.strip() for s in MIGRATIONS[number - 1].split(";")):
                if statement:
                    await conn.execute(statement)
        if version < SCHEMA_VERSION:
            await conn.execute(
                "INSERT INTO toolbridge_meta VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            if version:
                logger.info("journal %s: schema migrated from %d", description, version)


def _describe(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(conninfo)
        parts.pop("password", None)
        return make_conninfo("", **{k: str(v) for k, v in parts.items() if v is not None})
    except Exception:
        return "(the configured PostgreSQL database)"


def _error(exc: Exception, description: str) -> JournalError:
    text = str(exc).strip()
    if "No space left" in text or "disk full" in text:
        return JournalError(
            f"the disk of the journal database at {description} is full ({text}); the call "
            "was not recorded. Free space, then retry."
        )
    return JournalError(f"the journal at {description} failed: {text}")


def _not_owned(key: CallKey) -> JournalError:
    return JournalError(
        f"call {key.call_id!r} of session {key.session!r} is not owned by this journal: "
        "claim it first (its outcome was not recorded)"
    )


def _columns(keys: list[CallKey]) -> tuple[list[str], list[str], list[str]]:
    return (
        [key.session for key in keys],
        [key.call_id for key in keys],
        [key.args_hash for key in keys],
    )


def _finished(entry: JournalEntry | None) -> bool:
    return entry is not None and entry.state is CallState.FINISHED


def _as_is(value: Any) -> Any:
    """JSONB arrives decoded."""
    return value


def _running(op: _Claim, now: float) -> JournalEntry:
    return running_entry(op.key, op.tool, op.arguments, op.approval, now)
