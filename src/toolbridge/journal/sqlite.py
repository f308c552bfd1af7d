"""The embedded journal: SQLite in WAL mode, written a batch at a time with group commit.

The operations an event loop submits are gathered while its turns bring more (three at
most) and applied in a single transaction: a batch of 200 claims costs a few commits (64
operations at most in a transaction on the loop), not 200. With durability "process" a commit
is a write to the WAL with no fsync, so the batch runs right there on the loop when the
database is free (no thread hand-off, which on a busy machine cost more than the work;
the loop waits for that write, while the writer thread copies the WAL back into the file
once per thousand pages). When another
process holds the write lock, or with durability "power" (an fsync per commit), the
batch goes to a writer thread instead, and the loop does not wait.

A running call's row names its owner: a random byte of a side file this journal holds an
open-file-description lock on (Linux ``F_OFD_SETLK``, POSIX locks elsewhere) while it is
open. The kernel drops the lock when the process dies, so a running call whose owner's
byte is free was interrupted; one lock per journal, so a batch of any size takes no lock
per call.

Opening the file is `sqlite_file`'s job, the owner locks `sqlite_owners`'s and the group
commit `sqlite_writer`'s; what a row holds, what a claim gets and which migrations are due
are shared with the PostgreSQL journal (`rows`, `claims`, `migrations`). This module keeps
the journal's operations and their SQL.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolbridge.journal.base import CallJournal, Durability, check_limit, dropped_sessions
from toolbridge.journal.claims import (
    LetGo,
    claim_action,
    claimed_state,
    interrupted,
    not_owned,
    proven,
    running_entry,
    started_at,
    unheard,
)
from toolbridge.journal.records import (
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    ClaimRequest,
    JournalEntry,
    JournalError,
    NoJournal,
    journal_closed,
    session_in_use,
    tuple_maker,
)
from toolbridge.journal.rows import (
    COLUMNS,
    LISTING_ORDER,
    SESSIONS_QUERY,
    TEXT,
    page_condition,
    session_from_row,
)
from toolbridge.journal.sqlite_file import (
    connect,
    folder_error,
    journal_path,
    open_to_read,
    os_error,
    refuse_links,
)
from toolbridge.journal.sqlite_owners import Owner
from toolbridge.journal.sqlite_writer import NULL, GroupCommit, Job

__all__ = ["SQLiteJournal"]


class SQLiteJournal(GroupCommit, CallJournal):
    """A journal in one SQLite file (default: ``<workspace>/.toolbridge/journal.sqlite3``).

    Many processes may share the file: SQLite serialises their writes (waiting up to
    10 s for another writer), and the side file ``<name>-owners`` holds their owner locks.

    `create` False opens an existing journal only (to read or prune it): a path that holds
    no journal is a `JournalError`, and nothing is created there. `follow_links` False
    refuses a journal file (or side file, or folder) that is a symbolic link: the
    workspace's control folder is opened that way, so a link planted there cannot point
    the journal's writes at another file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "process",
        create: bool = True,
        follow_links: bool = True,
    ):
        self.path = journal_path(path)
        self.durability = durability
        self._create = create
        if not follow_links:
            refuse_links(self.path)
        if not create and not self.path.exists():
            raise NoJournal(
                f"no journal at {self.path}: the file does not exist (nothing was created). "
                "Check the path, or the workspace (--workspace) it is read from."
            )
        super().__init__(durability)
        self._sessions: set[str] = set()  # runs held by `hold_session`
        # Read only, in a folder this process cannot write (a read-only disk, a backup):
        # read as it is, never changed.
        self._reader = not create and not os.access(self.path.parent, os.W_OK)
        self._begin = "BEGIN" if self._reader else "BEGIN IMMEDIATE"
        self._conn = (
            open_to_read(self.path)
            if self._reader
            else connect(self.path, durability=durability, create=create, inline=self._inline)
        )
        self._checkpoints = self._inline and not self._reader  # (see `connect`)
        self._wal = self.path.with_name(self.path.name + "-wal")
        self._page_size = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
        try:
            self._owner = Owner(
                self.path.with_name(self.path.name + "-owners"),
                create=create,
                follow_links=follow_links,
                reader=self._reader,
            )
        except OSError as exc:
            self._conn.close()
            raise os_error(self.path, exc, "open its side file of owner locks") from None
        self._thread = threading.Thread(
            target=self._serve, name=f"toolbridge-journal:{self.path.name}", daemon=True
        )
        self._thread.start()

    @classmethod
    def in_workspace(
        cls,
        workspace: str | os.PathLike[str],
        *,
        durability: Durability = "process",
        create: bool = True,
    ) -> SQLiteJournal:
        """The journal of a workspace, ``.toolbridge/journal.sqlite3``, opened without
        following links (see the class docstring)."""
        path = journal_path(Path(workspace) / ".toolbridge" / "journal.sqlite3")
        folder = path.parent
        if create and not os.path.lexists(folder):
            try:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as control.py
            except OSError as exc:
                raise folder_error(path, exc) from None
        return cls(path, durability=durability, create=create, follow_links=False)

    # --- operations (run on the writer thread, inside a transaction) -------------------

    async def claim(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> Claim:
        request = ClaimRequest(key, tool, arguments, approval, queued)
        claim = (await self._claim_many([request]))[0]  # (not an override's: see there)
        if isinstance(claim, JournalError):
            raise claim
        return claim

    async def claim_many(self, calls: Sequence[ClaimRequest]) -> list[Claim | JournalError]:
        return await self._claim_many(calls)

    async def _claim_many(self, calls: Sequence[ClaimRequest]) -> list[Claim | JournalError]:
        """`claim_many`, which `claim` uses too: a subclass whose `claim_many` claims a call
        at a time (`CallJournal`'s) must not go round in a circle."""
        failed: dict[int, JournalError] = {}  # a call's own (a key or value not storable)
        asked: list[tuple[ClaimRequest, tuple[str, str | None]]] = []
        for place, call in enumerate(calls):
            try:
                asked.append((call, TEXT.claim_texts(*call[:4], call.arguments_text)))
            except JournalError as exc:
                failed[place] = exc
        inserted: list[bool] = []

        def op(conn: sqlite3.Connection) -> list[Claim | JournalError]:
            inserted.clear()  # (a batch that failed runs again)
            claims: list[Claim | JournalError] = []
            rows, held, owner = self._rows, self._owner.held, self._owner.number
            for call, texts in asked:
                key = call.key
                if key not in rows and key not in held:  # the common case: a new call
                    # (`_claim` and `running_entry` inline: this runs for every call)
                    key, tool, arguments, approval, queued, _ = call
                    now = time.time()
                    if queued:
                        started, state, stored = None, CallState.QUEUED, "queued"
                    else:  # (the state's text as such: `sqlite3` binds only a plain str fast)
                        started, state, stored = now, CallState.RUNNING, "running"
                    self._inserts.append(
                        (*key, tool, texts[0], stored, texts[1] or NULL, now, started or NULL,
                         owner)
                    )  # fmt: skip
                    held.add(key)
                    self._taken.append(key)
                    entry = JournalEntry(key, tool, arguments, state, 1, None, None, approval,
                                         now, started, None)  # fmt: skip
                    claims.append(_new_claim((ClaimAction.RUN, entry)))
                    inserted.append(True)
                    continue
                try:
                    claims.append(self._claim(conn, call))
                except JournalError as exc:  # its stored row is damaged: this call's alone
                    claims.append(exc)
                inserted.append(False)
            return claims

        def undo(conn: sqlite3.Connection, claims: list[Claim | JournalError]) -> None:
            for (call, _), claim, made in zip(asked, claims, inserted, strict=True):
                if isinstance(claim, Claim) and (how := unheard(claim, inserted=made)):
                    self._let_go_of(conn, call.key, how)

        claims: list[Claim | JournalError] = []
        if asked:
            keys = [call.key for call, _ in asked]
            claims = await self._submit(op, undo=undo, claims=keys)
        if not failed:
            return claims
        answers = iter(claims)
        return [failed[place] if place in failed else next(answers) for place in range(len(calls))]

    def _claim(self, conn: sqlite3.Connection, call: ClaimRequest) -> Claim:
        """Claim `call` in the batch's transaction, a call that has a row or that this
        journal holds (`claim_many` inserts the new ones)."""
        key, tool, arguments, _, queued, _ = call
        owner = self._owner
        row = self._rows.get(key)
        if row is None:  # claimed earlier in this batch: running
            return Claim(ClaimAction.BUSY, running_entry(key, tool, arguments))
        now = time.time()
        entry = TEXT.entry(row)
        action = claim_action(entry, row[_OWNER], held=owner.held, alive=owner.elsewhere)
        if action in (ClaimAction.REPLAY, ClaimAction.BUSY):
            return Claim(action, entry)
        self._own(key)  # its owner is gone: ours now
        if action is ClaimAction.RUN:  # it was queued, never started: same attempt
            started = started_at(queued, now)
            conn.execute(
                "UPDATE toolbridge_calls SET owner = ?, state = ?, started_at = ? "
                "WHERE session = ? AND call_id = ? AND args_hash = ?",
                (owner.number, claimed_state(queued), started, *key),
            )
            state = CallState(claimed_state(queued))
            return Claim(ClaimAction.RUN, replace(entry, state=state, started_at=started))
        _set_owner(conn, key, owner.number)  # it started: interrupted
        return Claim(ClaimAction.INTERRUPTED, entry)

    def _own(self, key: CallKey) -> None:
        self._owner.held.add(key)
        self._taken.append(key)

    def _let_go_of(self, conn: sqlite3.Connection, key: CallKey, how: LetGo) -> None:
        """Let go of an owned call without an outcome, as `how` says (once this batch
        commits)."""
        if how is LetGo.REQUEUE:
            conn.execute(
                "UPDATE toolbridge_calls SET owner = NULL, state = 'queued', started_at = NULL "
                "WHERE session = ? AND call_id = ? AND args_hash = ?",
                tuple(key),
            )
        elif how is LetGo.DELETE:
            conn.execute(
                "DELETE FROM toolbridge_calls WHERE session = ? AND call_id = ? AND args_hash = ?",
                (key.session, key.call_id, key.args_hash),
            )
        else:
            _set_owner(conn, key, None)
        self._let_go.append(key)

    async def start(self, key: CallKey) -> None:
        def op(conn: sqlite3.Connection) -> None:
            self._require_owned(key)
            self._starts.append((time.time(), *key))

        await self._submit(op, calls=(key,))

    async def unclaim(self, key: CallKey) -> None:
        def op(conn: sqlite3.Connection) -> None:
            if key in self._owner.held:
                self._let_go_of(conn, key, LetGo.REQUEUE)

        await self._submit(op, calls=(key,))

    async def restart(self, key: CallKey, *, queued: bool = False) -> JournalEntry:
        def op(conn: sqlite3.Connection) -> JournalEntry:
            self._require_owned(key)
            conn.execute(
                "UPDATE toolbridge_calls SET attempt = attempt + 1, state = ?, started_at = ? "
                "WHERE session = ? AND call_id = ? AND args_hash = ?",
                (claimed_state(queued), started_at(queued, time.time()), *key),
            )
            return TEXT.entry(_select(conn, key))

        result: JournalEntry = await self._submit(op, calls=(key,))
        return result

    async def retry(
        self,
        key: CallKey,
        *,
        approval: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> JournalEntry | None:
        approval_text = TEXT.approval(approval)

        def op(conn: sqlite3.Connection) -> JournalEntry | None:
            row = _select(conn, key)
            if row is None or key in self._owner.held:
                return None
            if not interrupted(TEXT.entry(row)):
                return None
            conn.execute(
                "UPDATE toolbridge_calls SET state = ?, attempt = attempt + 1, "
                "outcome = NULL, error_kind = NULL, approval = ?, started_at = ?, "
                "finished_at = NULL, owner = ? WHERE session = ? AND call_id = ? "
                "AND args_hash = ?",
                (claimed_state(queued), approval_text, started_at(queued, time.time()),
                 self._owner.number, *key),
            )  # fmt: skip
            self._own(key)
            return TEXT.entry(_select(conn, key))

        def undo(conn: sqlite3.Connection, entry: JournalEntry | None) -> None:
            if entry is not None:  # nobody heard it: left running, ownerless, so interrupted
                self._let_go_of(conn, key, LetGo.DISOWN)

        result: JournalEntry | None = await self._submit(op, undo=undo, calls=(key,))
        return result

    async def finish(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> None:
        await self.finish_soon(key, outcome, error_kind=error_kind)

    def finish_soon(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> asyncio.Future[None]:
        return self._store_soon(key, TEXT.dumps(outcome), error_kind or NULL)

    async def refuse(
        self,
        key: CallKey,
        tool: str,
        arguments: Any,
        outcome: Mapping[str, Any],
        *,
        error_kind: str | None,
    ) -> None:
        texts = TEXT.refusal(key, tool, arguments, outcome)

        def op(conn: sqlite3.Connection) -> None:
            now = time.time()
            conn.execute(
                f"INSERT INTO toolbridge_calls ({COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, 'refused', 0, ?, ?, NULL, ?, NULL, ?)",
                (*key, tool, texts[0], texts[1], error_kind, now, now),
            )

        await self._submit(op)

    async def abandon(self, key: CallKey) -> None:
        def op(conn: sqlite3.Connection) -> None:
            if key in self._owner.held:  # left running without an owner: interrupted
                # Let go at once, even if this batch fails (a full disk): a call of ours
                # that we do not hold is found interrupted by our next claim of it.
                self._drop(key)
                _set_owner(conn, key, None)

        await self._submit(op, calls=(key,))

    def _require_owned(self, key: CallKey) -> None:
        if key not in self._owner.held:
            raise not_owned(key)

    def _seen(self, row: Any) -> JournalEntry:
        """The entry of a row with its owner (last), as a reader can prove it: a running
        call whose owner's lock is gone (and not this journal's) is interrupted."""
        return proven(TEXT.entry(row), row[_OWNER], held=self._owner.held,
                      alive=self._owner.elsewhere)  # fmt: skip

    async def entry(self, key: CallKey) -> JournalEntry | None:
        def op(conn: sqlite3.Connection) -> JournalEntry | None:
            row = conn.execute(
                f"SELECT {COLUMNS}, owner FROM toolbridge_calls "
                "WHERE session = ? AND call_id = ? AND args_hash = ?",
                (key.session, key.call_id, key.args_hash),
            ).fetchone()
            return self._seen(row) if row is not None else None

        result: JournalEntry | None = await self._submit(op, calls=(key,))
        return result

    async def entries(
        self,
        *,
        session: str | None = None,
        limit: int | None = None,
        after: JournalEntry | None = None,
    ) -> list[JournalEntry]:
        check_limit(limit)
        conditions: list[str] = []
        params: list[Any] = []
        if session is not None:
            conditions.append("session = ?")
            params.append(session)
        if after is not None:
            columns, values = page_condition(session, after)
            conditions.append(f"({columns}) > ({', '.join('?' * len(values))})")
            params += values
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""

        def op(conn: sqlite3.Connection) -> list[JournalEntry]:
            rows = conn.execute(
                f"SELECT {COLUMNS}, owner FROM toolbridge_calls {where} "
                f"ORDER BY {LISTING_ORDER} LIMIT ?",
                (*params, -1 if limit is None else limit),
            ).fetchall()
            return [self._seen(row) for row in rows]

        result: list[JournalEntry] = await self._submit(op)
        return result

    async def counts(self) -> dict[str, int]:
        def op(conn: sqlite3.Connection) -> dict[str, int]:
            rows = conn.execute("SELECT session, COUNT(*) FROM toolbridge_calls GROUP BY session")
            where = str(self.path)
            return {session_from_row(name, 0, where)[0]: int(count) for name, count in rows}

        result: dict[str, int] = await self._submit(op)
        return result

    async def hold_session(self, session: str) -> None:
        if self._closed:
            raise journal_closed(str(self.path))
        # The set covers runs of this journal (its own locks never conflict with each other).
        if session in self._sessions or not self._owner.lock_session(session):
            raise session_in_use(session)
        self._sessions.add(session)

    def release_session(self, session: str) -> None:
        if session in self._sessions:
            self._sessions.discard(session)
            self._owner.unlock_session(session)

    async def save_run(self, session: str, state: Mapping[str, Any]) -> None:
        text = TEXT.dumps(state)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO toolbridge_runs VALUES (?, ?, ?) ON CONFLICT (session) "
                "DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                (session, text, time.time()),
            )

        await self._submit(op)

    async def load_run(self, session: str) -> dict[str, Any] | None:
        def op(conn: sqlite3.Connection) -> dict[str, Any] | None:
            row = conn.execute(
                "SELECT state FROM toolbridge_runs WHERE session = ?", (session,)
            ).fetchone()
            return TEXT.loads(row[0]) if row is not None else None

        result: dict[str, Any] | None = await self._submit(op)
        return result

    async def sessions(self) -> list[tuple[str, float]]:
        def op(conn: sqlite3.Connection) -> list[tuple[str, float]]:
            rows = conn.execute(SESSIONS_QUERY).fetchall()
            return [session_from_row(name, when, str(self.path)) for name, when in rows]

        result: list[tuple[str, float]] = await self._submit(op)
        return result

    async def prune(
        self, *, older_than: float | None = None, keep_sessions: int | None = None
    ) -> int:
        dropped = await dropped_sessions(self, older_than, keep_sessions)

        def op(conn: sqlite3.Connection) -> int:
            deleted = 0
            if older_than is not None:
                cursor = conn.execute(
                    "DELETE FROM toolbridge_calls WHERE state IN ('finished', 'refused') "
                    "AND finished_at < ?",
                    (time.time() - older_than,),
                )
                deleted += cursor.rowcount
            for name in dropped:
                cursor = conn.execute(
                    "DELETE FROM toolbridge_calls WHERE session = ? "
                    "AND state IN ('finished', 'refused')",
                    (name,),
                )
                deleted += cursor.rowcount
                conn.execute("DELETE FROM toolbridge_runs WHERE session = ?", (name,))
            return deleted

        result: int = await self._submit(op)
        return result

    async def close(self) -> None:
        with self._pending_lock:  # a loop in another thread may be adding a job
            if self._closed:
                return
            self._closed = True
            pending, self._pending = self._pending, {}
        for jobs in pending.values():  # not handed over yet: answered before the end
            # A claim whose caller is gone is not run: what it took could not be undone now
            # (an outcome nobody waits for is still stored: it is the truth about the call).
            heard = [job for job in jobs if not _unheard(job)]
            if heard:
                self._hand_over(heard)
        self._stop_writer()
        await asyncio.to_thread(self._thread.join)


def _unheard(job: Job) -> bool:
    """Whether `job` takes what nobody will hear of (its caller was cancelled): undone if
    it ran, so better not run."""
    return job.undo is not None and job.future is not None and job.future.cancelled()


_new_claim = tuple_maker(Claim)

_OWNER = len(COLUMNS.split(","))  # where a batch's rows (`sqlite_writer._rows`) hold the owner


def _select(conn: sqlite3.Connection, key: CallKey) -> Any:
    return conn.execute(
        f"SELECT {COLUMNS} FROM toolbridge_calls "
        "WHERE session = ? AND call_id = ? AND args_hash = ?",
        (key.session, key.call_id, key.args_hash),
    ).fetchone()


def _set_owner(conn: sqlite3.Connection, key: CallKey, owner: int | None) -> None:
    conn.execute(
        "UPDATE toolbridge_calls SET owner = ? WHERE session = ? AND call_id = ? AND args_hash = ?",
        (owner, key.session, key.call_id, key.args_hash),
    )
