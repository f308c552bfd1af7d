"""The embedded journal: SQLite in WAL mode, written a batch at a time with group commit.

The operations submitted in one tick of the event loop are applied at its end in a single
transaction: a batch of 200 claims costs one commit. With durability "process" a commit
is a write to the WAL with no fsync, so the batch runs right there on the loop when the
database is free (no thread hand-off, which on a busy machine cost more than the work;
the loop waits for that write, and, once per thousand pages, a checkpoint). When another
process holds the write lock, or with durability "power" (an fsync per commit), the
batch goes to a writer thread instead, and the loop does not wait.

A running call's row names its owner: a random byte of a side file this journal holds an
open-file-description lock on (Linux ``F_OFD_SETLK``, POSIX locks elsewhere) while it is
open. The kernel drops the lock when the process dies, so a running call whose owner's
byte is free was interrupted; one lock per journal, so a batch of any size takes no lock
per call.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import queue
import secrets
import sqlite3
import stat
import struct
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toolbridge.journal.base import CallJournal, Durability, check_limit, deliver, dropped_sessions
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
from toolbridge.journal.migrations import migrations_due, schema_version_of, statements
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
from toolbridge.journal.rows import COLUMNS, LISTING_ORDER, SESSIONS_QUERY, TEXT, page_after

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteJournal"]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
OPEN_RETRY_DELAY = 0.01  # between tries to open a journal another process is creating

MIGRATIONS: tuple[str, ...] = (
    # 1: calls
    """
    CREATE TABLE toolbridge_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE toolbridge_calls (
        session TEXT NOT NULL, call_id TEXT NOT NULL, args_hash TEXT NOT NULL,
        tool TEXT NOT NULL, arguments TEXT NOT NULL, state TEXT NOT NULL,
        attempt INTEGER NOT NULL, outcome TEXT, error_kind TEXT, approval TEXT,
        created_at REAL NOT NULL, started_at REAL, finished_at REAL,
        PRIMARY KEY (session, call_id, args_hash)
    );
    """,
    # 2: runs of the agent loop, and pruning by age without a full scan
    """
    CREATE TABLE toolbridge_runs (
        session TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at REAL NOT NULL
    );
    CREATE INDEX toolbridge_calls_by_time ON toolbridge_calls (created_at);
    """,
    # 3: the owner of a running call in its row (version 2 locked one byte per call). A call
    # left running by version 2 has no owner: it is found interrupted. Stop every process of
    # the older version before the first one of this version opens the journal.
    """
    ALTER TABLE toolbridge_calls ADD COLUMN owner INTEGER;
    """,
    # 4: the states "queued" (claimed, waiting for a slot: its tool has not started) and
    # "refused" (refused before it ran, recorded for the audit), which version 3 cannot
    # read; no table changes. A version 3 process refuses the journal from here on, saying
    # it was written by a newer toolbridge, rather than misreading those rows.
    "",
)
SCHEMA_VERSION = len(MIGRATIONS)
"""The layout this toolbridge writes; older ones are migrated, newer ones refused."""
_INSTEAD = "another journal file"  # what to give a toolbridge too old for a journal


Op = Callable[[sqlite3.Connection], Any]
Undo = Callable[[sqlite3.Connection, Any], None]


@dataclass(slots=True)
class _Job:
    """One operation and where its answer goes; `undo` runs if nobody is left to hear it."""

    op: Op
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any] | None
    undo: Undo | None = None
    claims: CallKey | None = None  # the call a claim asks about: its row is read with the batch


def _undo(job: _Job, answer: Any) -> _Job:
    """The job that undoes what `job` did, whose `answer` nobody heard."""
    undo = job.undo
    assert undo is not None
    return _Job(lambda conn: undo(conn, answer), job.loop, None)


class _Owner:
    """This journal's identity in running rows: a byte of the side file it keeps locked, and
    the calls it runs now (`held`, touched only by the batch being written, under
    `SQLiteJournal._writing`).

    Opened without `create` and no side file there, it is a reader's: no journal ever
    opened the file, so no owner is alive, and it owns nothing (fd -1, number 0). A
    `reader` (of a journal in a folder it cannot write) opens it read-only and owns nothing.
    """

    def __init__(
        self, path: Path, *, create: bool = True, follow_links: bool = True, reader: bool = False
    ) -> None:
        flags = (os.O_RDONLY if reader else os.O_RDWR) | os.O_CLOEXEC
        flags |= os.O_CREAT if create else 0
        self.number = 0
        self.held: set[CallKey] = set()
        self._path, self._flags = path, flags | (0 if follow_links else os.O_NOFOLLOW)
        try:
            self.fd = os.open(path, self._flags, 0o600)
        except FileNotFoundError:
            if create:
                raise
            self.fd = -1
            return
        if reader:  # it only tests others' locks (a read-only file takes none)
            _OPEN_OWNERS.add(self)
            return
        while True:
            self.number = secrets.randbits(62) + 1
            if _lock(self.fd, self.number, fcntl.F_WRLCK):
                break
        _OPEN_OWNERS.add(self)

    def elsewhere(self, number: int | None) -> bool:
        """Whether another open journal owns the calls whose owner is `number` (this one's
        own calls are in `held`)."""
        if number is None or number == self.number:
            return False
        if self.fd < 0:  # a reader's: the side file may have come since (a writer opened)
            try:
                self.fd = os.open(self._path, self._flags)
            except OSError:  # still none (or not one to open): no owner can be proven alive
                return False
            _OPEN_OWNERS.add(self)  # a forked child closes its copy, as of any owner's
        return _locked_by_another(self.fd, number)

    def close(self) -> None:
        self.held.clear()
        _OPEN_OWNERS.discard(self)
        if self.fd >= 0:
            os.close(self.fd)  # the kernel drops the lock: calls still owned are interrupted
            self.fd = -1


# Owners open in this process. A child forked without exec (a tool's multiprocessing
# worker) inherits their descriptors, and with them the open file description an OFD lock
# belongs to: the lock would outlive this process for as long as the child lives, and its
# calls would look busy instead of interrupted. The child closes its copies (the parent's
# lock stays: it goes with the last descriptor).
_OPEN_OWNERS: weakref.WeakSet[_Owner] = weakref.WeakSet()


def _forget_owners_in_child() -> None:
    for owner in list(_OPEN_OWNERS):
        owner.close()


os.register_at_fork(after_in_child=_forget_owners_in_child)


_SESSION_LOCKS = (1 << 62) + 2  # session lock bytes start past every owner number (1 .. 2**62)
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
_FLOCK = "@hhqqi4x"  # struct flock: type, whence, start, len, pid


def _lock(fd: int, offset: int, kind: int) -> bool:
    command = _OFD_SETLK if _OFD_SETLK is not None else fcntl.F_SETLK
    try:
        fcntl.fcntl(fd, command, struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0))
    except OSError:
        return False
    return True


def _locked_by_another(fd: int, offset: int) -> bool:
    command = _OFD_GETLK if _OFD_GETLK is not None else fcntl.F_GETLK
    probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    kind = struct.unpack(_FLOCK, fcntl.fcntl(fd, command, probe))[0]
    return bool(kind != fcntl.F_UNLCK)


class SQLiteJournal(CallJournal):
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
        self.path = Path(path)
        self.durability = durability
        self._create = create
        if not follow_links:
            _refuse_links(self.path)
        if not create and not self.path.exists():
            raise JournalError(
                f"no journal at {self.path}: the file does not exist (nothing was created). "
                "Check the path, or the workspace (--workspace) it is read from."
            )
        self._jobs: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        # One batch at a time (on the loop or the writer thread); batches handed to the
        # thread and not done yet (none: a batch may run on the loop without overtaking).
        self._writing = threading.Lock()
        self._handed = 0
        self._handed_lock = threading.Lock()
        self._inline = durability == "process"
        # Jobs submitted on a loop in this tick: handed to the writer in one go at its end.
        self._pending: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        self._closed = False
        # Per batch, on the writer thread: the rows its claims asked about, new rows to insert,
        # finished calls to store.
        self._rows: dict[CallKey, Any] = {}
        self._inserts: list[tuple[Any, ...]] = []
        self._finishes: list[tuple[Any, ...]] = []
        self._sessions: set[str] = set()  # runs held by `hold_session`
        self._starts: list[tuple[Any, ...]] = []
        self._taken: list[CallKey] = []  # owned from this batch on, unless it rolls back
        self._let_go: list[CallKey] = []  # not owned once this batch commits
        # Read only, in a folder this process cannot write (a read-only disk, a backup):
        # read as it is, never changed.
        self._reader = not create and not os.access(self.path.parent, os.W_OK)
        self._begin = "BEGIN" if self._reader else "BEGIN IMMEDIATE"
        self._conn = self._open_to_read() if self._reader else self._connect()
        try:
            self._owner = _Owner(
                self.path.with_name(self.path.name + "-owners"),
                create=create,
                follow_links=follow_links,
                reader=self._reader,
            )
        except OSError as exc:
            self._conn.close()
            raise self._os_error(exc, "open its side file of owner locks") from None
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
        folder = Path(workspace) / ".toolbridge"
        path = folder / "journal.sqlite3"
        if create and not os.path.lexists(folder):
            try:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as control.py
            except OSError as exc:
                raise _folder_error(path, exc) from None
        return cls(path, durability=durability, create=create, follow_links=False)

    # --- opening -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
        except sqlite3.Error as exc:
            raise self._error(exc, "open") from None
        conn.text_factory = _text
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                if not self._create and _schema_version(conn, self.path) == 0:
                    raise JournalError(
                        f"{self.path} holds no toolbridge journal (nothing was created or "
                        "changed). Check the path."
                    )
                conn.execute("PRAGMA journal_mode=WAL")
                sync = "FULL" if self.durability == "power" else "NORMAL"
                conn.execute(f"PRAGMA synchronous={sync}")
                self._migrate(conn)
                if self._inline:  # batches on the loop never wait; the thread sets its wait
                    conn.execute("PRAGMA busy_timeout = 0")
                return conn
            except sqlite3.OperationalError as exc:
                # Turning a new file to WAL while another process writes it is refused at
                # once (SQLite does not wait where waiting could deadlock): ask again.
                if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY and (
                    time.monotonic() < deadline
                ):
                    time.sleep(OPEN_RETRY_DELAY)
                    continue
                conn.close()
                raise self._error(exc, "open") from None
            except sqlite3.Error as exc:
                conn.close()
                raise self._error(exc, "open") from None
            except JournalError:
                conn.close()
                raise

    def _open_to_read(self) -> sqlite3.Connection:
        """The journal in a folder this process cannot write, opened read-only; on a
        read-only file system as it is (SQLite's immutable mode: the folder cannot hold the
        shared-memory file WAL reads need, and nothing can change the file there)."""
        wal = self.path.with_name(self.path.name + "-wal")
        frozen = bool(os.statvfs(self.path.parent).f_flag & os.ST_RDONLY)
        if frozen and wal.exists() and wal.stat().st_size > 0:
            raise JournalError(
                f"the journal {self.path} has changes in {wal.name} not yet in its file, and "
                f"{self.path.parent} is read-only, so they cannot be read. Copy the journal "
                "with its -wal file to a writable folder and read it there."
            )
        # Immutable only on a read-only file system, where no writer can change the file
        # under the reader; elsewhere (a folder of another user) SQLite reads it as it
        # reads any WAL journal, or says why it cannot.
        try:
            conn = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?mode=ro{'&immutable=1' if frozen else ''}",
                uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
        except sqlite3.Error as exc:
            raise self._error(exc, "open") from None
        conn.text_factory = _text
        try:
            version = _schema_version(conn, self.path)
            if version == 0:
                raise JournalError(
                    f"{self.path} holds no toolbridge journal (nothing was created or "
                    "changed). Check the path."
                )
            # Nothing is migrated here: a newer journal, or one too old to read, is refused.
            migrations_due(version, MIGRATIONS, create=False, where=str(self.path),
                           instead=_INSTEAD)  # fmt: skip
        except sqlite3.Error as exc:
            conn.close()
            raise self._error(exc, "open") from None
        except JournalError:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = _schema_version(conn, self.path)
            due = migrations_due(version, MIGRATIONS, create=self._create,
                                 where=str(self.path), instead=_INSTEAD)  # fmt: skip
            for number in due:
                for statement in statements(MIGRATIONS[number - 1]):
                    conn.execute(statement)
            if due and version:
                logger.info(
                    "journal %s: schema migrated from version %d to %d",
                    self.path, version, SCHEMA_VERSION,
                )  # fmt: skip
            if due:
                conn.execute(
                    "INSERT OR REPLACE INTO toolbridge_meta VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _error(self, exc: sqlite3.Error, doing: str) -> JournalError:
        text = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text
        ):
            return JournalError(
                f"the journal {self.path} is corrupt or not a journal ({text}). Move it aside "
                "to start a new one; calls it recorded can then run again."
            )
        if "unable to open" in text or "readonly" in text or "read-only" in text:
            return JournalError(
                f"the journal {self.path} cannot {doing} ({text}): {_why_not_writable(self.path)}"
            )
        if "locked" in text or "busy" in text:
            return JournalError(
                f"the journal {self.path} stayed locked by another process for "
                f"{BUSY_TIMEOUT_MS // 1000} s while trying to {doing}; is a process stuck?"
            )
        if "full" in text:
            return JournalError(
                f"the disk holding the journal {self.path} is full ({text}); the call was "
                "not recorded. Free space, then retry."
            )
        return JournalError(
            f"the journal {self.path} failed to {doing}: {text}. Check the file and the disk "
            "it is on; move the file aside to start a new journal if it stays broken."
        )

    def _os_error(self, exc: OSError, doing: str) -> JournalError:
        if exc.errno == errno.ENOSPC:
            return JournalError(
                f"the disk holding the journal {self.path} is full ({exc.strerror}); free "
                "space, then retry."
            )
        if exc.errno == errno.ELOOP:
            return _link_error(self.path.with_name(self.path.name + "-owners"))
        return JournalError(
            f"the journal {self.path} cannot {doing} ({exc.strerror}): "
            f"{_why_not_writable(self.path)}"
        )

    # --- the writer thread -------------------------------------------------------------

    async def _submit(
        self, op: Op, *, undo: Undo | None = None, claims: CallKey | None = None
    ) -> Any:
        if self._closed:
            raise journal_closed(str(self.path))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:  # the first job of this tick: hand the tick's jobs over after it
            pending = self._pending[loop] = []
            loop.call_soon(self._hand_over, loop)
        pending.append(_Job(op, loop, future, undo, claims))
        return await future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        # One batch per tick, not one per call: the 200 claims of a batch are one commit.
        jobs = self._pending.pop(loop, None)
        if not jobs:  # (`close` may have handed them over already)
            return
        if self._inline and self._handed == 0 and self._writing.acquire(blocking=False):
            try:  # the database is ours: no thread hand-off (see the module docstring)
                if self._handed == 0 and self._run_batch(jobs, inline=True):
                    return
            finally:
                self._writing.release()
        self._put(jobs)

    def _put(self, jobs: list[_Job]) -> None:
        """Hand `jobs` to the writer thread."""
        with self._handed_lock:
            self._handed += 1
        self._jobs.put(jobs)

    def _serve(self) -> None:
        while (first := self._jobs.get()) is not None:
            jobs = list(first)
            handed = 1
            stop = False
            while True:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                jobs.extend(more)
                handed += 1
            try:
                with self._writing:
                    # The loop's batches do not wait for another process: this one may.
                    self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                    try:
                        self._run_batch(jobs)
                    finally:
                        if self._inline:
                            self._conn.execute("PRAGMA busy_timeout = 0")
            except Exception as exc:  # a dead thread would leave every caller waiting
                logger.exception("journal batch failed on %s", self.path)
                error = JournalError(f"the journal {self.path} failed: {exc!r}")
                self._answer([(job, False, error) for job in jobs if job.future is not None])
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

    def _run_batch(self, jobs: list[_Job], *, inline: bool = False) -> bool:
        """Apply `jobs` in one transaction; ownership changes only once it has committed.

        `inline` (on the event loop): False, with nothing done, when another process holds
        the write lock (the writer thread waits for it, not the loop)."""
        if inline and not self._begin_at_once():
            return False
        held = self._owner.held
        self._taken.clear()
        self._let_go.clear()
        self._inserts.clear()
        self._finishes.clear()
        self._starts.clear()
        results: list[tuple[bool, Any]] = []
        try:
            if not inline:
                self._conn.execute(self._begin)
            self._rows = _rows(self._conn, [job.claims for job in jobs if job.claims is not None])
            for job in jobs:
                taken = len(self._taken)
                try:
                    results.append((True, job.op(self._conn)))
                except sqlite3.Error:
                    raise
                except Exception as exc:  # one job's failure is its own, never the thread's
                    held.difference_update(self._taken[taken:])
                    del self._taken[taken:]
                    if not isinstance(exc, JournalError):
                        logger.exception("journal operation failed on %s", self.path)
                        exc = JournalError(f"the journal {self.path} failed: {exc!r}")
                    results.append((False, exc))
            if self._inserts:
                self._conn.executemany(_INSERT, self._inserts)
            if self._starts:
                self._conn.executemany(_START, self._starts)
            if self._finishes:
                self._conn.executemany(_FINISH, self._finishes)
            self._conn.execute("COMMIT")
        except Exception as exc:  # the batch is undone as a whole, and so is what it took
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            held.difference_update(self._taken)
            if isinstance(exc, sqlite3.Error):
                error = self._error(exc, "record calls")
            else:
                logger.exception("journal batch failed on %s", self.path)
                error = JournalError(f"the journal {self.path} failed: {exc!r}")
            results = [(False, error)] * len(jobs)
        else:
            held.difference_update(self._let_go)
        answers = [(job, ok, value) for job, (ok, value) in zip(jobs, results, strict=True)
                   if job.future is not None]  # fmt: skip
        if inline and _runs_here(jobs[0].loop):  # every job's loop (`_hand_over`): no wake-up
            self._settle_all(answers)
        else:
            self._answer(answers)
        return True

    def _answer(self, answers: list[tuple[_Job, bool, Any]]) -> None:
        """Send each answer to its caller's loop: one wake-up of each loop, not one per call.
        A loop closed meanwhile (its ``asyncio.run`` ended) hears nothing: what its jobs
        took is undone here, and the writer goes on serving the other loops."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, bool, Any]]] = {}
        for answer in answers:
            by_loop.setdefault(answer[0].loop, []).append(answer)
        for loop, batch in by_loop.items():
            try:
                loop.call_soon_threadsafe(self._settle_all, batch)
            except RuntimeError:  # the loop is closed
                for job, ok, value in batch:
                    if ok and job.undo is not None:
                        self._put([_undo(job, value)])

    def _settle_all(self, answers: list[tuple[_Job, bool, Any]]) -> None:
        for job, ok, value in answers:
            self._settle(job, ok, value)

    def _settle(self, job: _Job, ok: bool, value: Any) -> None:
        """On the caller's loop: hand over the answer, or undo it if the caller is gone."""
        assert job.future is not None
        if not deliver(job.future, ok, value) and ok and job.undo is not None and not self._closed:
            self._put([_undo(job, value)])

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
        call = TEXT.new_call(key, tool, arguments, approval, queued=queued)
        owner = self._owner
        inserted = False

        def op(conn: sqlite3.Connection) -> Claim:
            nonlocal inserted
            row = self._rows.get(key)
            if row is None and key in owner.held:  # claimed earlier in this batch: running
                return Claim(ClaimAction.BUSY, running_entry(key, tool, arguments))
            now = time.time()
            if row is None:
                self._inserts.append(
                    (key.session, key.call_id, key.args_hash, tool, call.arguments_text,
                     claimed_state(queued), call.approval_text, now, started_at(queued, now),
                     owner.number)
                )  # fmt: skip
                self._own(key)
                inserted = True
                entry = running_entry(key, tool, arguments, approval, now, queued=queued)
                return Claim(ClaimAction.RUN, entry)
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

        def undo(conn: sqlite3.Connection, claim: Claim) -> None:
            # The caller was cancelled before it heard the answer, so it never ran the call.
            if (how := unheard(claim, inserted=inserted)) is not None:
                self._let_go_of(conn, key, how)

        result: Claim = await self._submit(op, undo=undo, claims=key)
        return result

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

        await self._submit(op)

    async def restart(self, key: CallKey, *, queued: bool = False) -> JournalEntry:
        def op(conn: sqlite3.Connection) -> JournalEntry:
            self._require_owned(key)
            conn.execute(
                "UPDATE toolbridge_calls SET attempt = attempt + 1, state = ?, started_at = ? "
                "WHERE session = ? AND call_id = ? AND args_hash = ?",
                (claimed_state(queued), started_at(queued, time.time()), *key),
            )
            return TEXT.entry(_select(conn, key))

        result: JournalEntry = await self._submit(op)
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

        result: JournalEntry | None = await self._submit(op, undo=undo)
        return result

    async def finish(
        self, key: CallKey, outcome: Mapping[str, Any], *, error_kind: str | None = None
    ) -> None:
        outcome_text = TEXT.dumps(outcome)

        def op(conn: sqlite3.Connection) -> None:
            self._require_owned(key)
            self._finishes.append(
                (outcome_text, error_kind, time.time(), key.session, key.call_id, key.args_hash)
            )
            self._let_go.append(key)

        await self._submit(op)

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
                self._owner.held.discard(key)
                _set_owner(conn, key, None)

        await self._submit(op)

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
        conditions: list[str] = []
        params: list[Any] = []
        if session is not None:
            conditions.append("session = ?")
            params.append(session)
        if after is not None:
            conditions.append(f"({LISTING_ORDER}) > (?, ?, ?, ?)")
            params += page_after(after)
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
            return {str(name): int(count) for name, count in rows}

        result: dict[str, int] = await self._submit(op)
        return result

    async def hold_session(self, session: str) -> None:
        if self._closed:
            raise journal_closed(str(self.path))
        # A byte of the owners file past every owner number; the set covers runs of this
        # journal (its own locks never conflict with each other).
        offset = _SESSION_LOCKS + session_lock_number(session)
        if session in self._sessions or not _lock(self._owner.fd, offset, fcntl.F_WRLCK):
            raise session_in_use(session)
        self._sessions.add(session)

    def release_session(self, session: str) -> None:
        if session in self._sessions:
            self._sessions.discard(session)
            if self._owner.fd >= 0:
                _lock(self._owner.fd, _SESSION_LOCKS + session_lock_number(session), fcntl.F_UNLCK)

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
            return [(str(name), float(when)) for name, when in rows]

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
        if self._closed:
            return
        self._closed = True
        for loop in list(self._pending):  # submitted this tick: they are answered before the end
            self._hand_over(loop)
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)


_INSERT = (
    f"INSERT INTO toolbridge_calls ({COLUMNS}, owner) "
    "VALUES (?, ?, ?, ?, ?, ?, 1, NULL, NULL, ?, ?, ?, NULL, ?)"
)
_START = (
    "UPDATE toolbridge_calls SET state = 'running', started_at = ? "
    "WHERE session = ? AND call_id = ? AND args_hash = ? AND state = 'queued'"
)
_FINISH = (
    "UPDATE toolbridge_calls SET state = 'finished', outcome = ?, error_kind = ?, "
    "finished_at = ?, owner = NULL WHERE session = ? AND call_id = ? AND args_hash = ?"
)
_OWNER = len(COLUMNS.split(","))  # where `_rows` puts the owner, after the stored columns
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
        params = [part for key in chunk for part in (key.session, key.call_id, key.args_hash)]
        for row in conn.execute(
            f"SELECT {_JOINED_COLUMNS} FROM (VALUES {values}) AS k "
            "CROSS JOIN toolbridge_calls AS c ON c.session = k.column1 "
            "AND c.call_id = k.column2 AND c.args_hash = k.column3",
            params,
        ):
            found[CallKey(row[0], row[1], row[2])] = row
    return found


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is the loop running in this thread (its futures can be set here)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _text(data: bytes) -> str:
    """Stored text as `str`. Bytes that are not UTF-8 (a damaged row) arrive as lone
    surrogates, which `rows.loads` refuses: the call they are in fails, not the whole batch."""
    return data.decode("utf-8", "surrogateescape")


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "toolbridge_meta" not in tables:
        if tables:
            raise JournalError(
                f"the SQLite file {path} holds other tables and no toolbridge journal; give "
                "the journal a file of its own"
            )
        return 0
    row = conn.execute("SELECT value FROM toolbridge_meta WHERE key = 'schema_version'").fetchone()
    return schema_version_of(row[0] if row is not None else None, str(path))


def _why_not_writable(path: Path) -> str:
    """Why the journal at `path` cannot be created or written, and what to do about it."""
    folder = path.parent
    if path.is_dir():
        return (
            f"{path} is a folder, not a journal file. Give the path of the journal's file "
            "(a workspace's journal is <workspace>/.toolbridge/journal.sqlite3)."
        )
    if not folder.is_dir():
        return (
            f"the folder {folder} does not exist. Create it, or give the journal a path in "
            "a folder that exists."
        )
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return (
            f"{folder} is read-only for this process (a read-only file system, or no write "
            "permission), and the journal writes its file and side files (-wal, -shm, "
            "-owners) there. Make it writable, or keep the journal in a writable place "
            "(SQLiteJournal(path); --journal PATH or TOOLBRIDGE_JOURNAL on the command line)."
        )
    return "check that the file and its folder are readable and writable by this process."


def _folder_error(path: Path, exc: OSError) -> JournalError:
    if exc.errno == errno.ENOSPC:
        return JournalError(
            f"the disk holding the journal {path} is full ({exc.strerror}); free space, then retry."
        )
    return JournalError(
        f"the journal folder {path.parent} cannot be created ({exc.strerror}): "
        f"{_why_not_writable(path.parent)}"
    )


def _link_error(path: Path) -> JournalError:
    return JournalError(
        f"the journal refuses {path}: it is a symbolic link (or not a plain file), and the "
        "journal of a workspace is opened without following links so that its writes cannot "
        "be pointed at another file. Remove it; the journal creates its own file."
    )


def _refuse_links(path: Path) -> None:
    """Refuse a journal whose folder is not a real directory, or whose file or side files
    are links or not plain files (checked before SQLite opens the path)."""
    try:
        folder = os.lstat(path.parent)
    except FileNotFoundError:
        return  # nothing there yet: opening it says so
    if not stat.S_ISDIR(folder.st_mode):
        raise JournalError(
            f"the journal folder {path.parent} is a symbolic link or not a directory; the "
            "journal of a workspace is opened without following links. Remove it; the "
            "journal creates a real folder."
        )
    for name in (path.name, *(path.name + side for side in ("-wal", "-shm", "-owners"))):
        try:
            found = os.lstat(path.with_name(name))
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(found.st_mode):
            raise _link_error(path.with_name(name))


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
