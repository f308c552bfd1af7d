"""Opening a SQLite journal's file: its folder and links checked, the connection made, its
schema created or migrated, and each way that fails said as a `JournalError` that says
what to do.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import stat
import time
from pathlib import Path

from toolbridge.journal.base import Durability
from toolbridge.journal.migrations import (
    check_tables,
    migrations_due,
    schema_version_of,
    statements,
)
from toolbridge.journal.records import JournalError, NoJournal
from toolbridge.journal.rows import LISTING_INDEX

__all__ = [
    "BUSY_TIMEOUT_MS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "connect",
    "database_error",
    "folder_error",
    "open_to_read",
    "os_error",
    "refuse_links",
]

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


def connect(
    path: Path, *, durability: Durability, create: bool, inline: bool
) -> sqlite3.Connection:
    """The journal at `path`, opened (and created, unless `create` is False) to write, its
    schema migrated; `inline` gives it no busy wait (see `SQLiteJournal`)."""
    try:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
            check_same_thread=False,
        )  # fmt: skip
    except sqlite3.Error as exc:
        raise database_error(path, exc, "open") from None
    conn.text_factory = _text
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if not create and _schema_version(conn, path) == 0:
                raise NoJournal(
                    f"{path} holds no toolbridge journal (nothing was created or "
                    "changed). Check the path."
                )
            conn.execute("PRAGMA journal_mode=WAL")
            sync = "FULL" if durability == "power" else "NORMAL"
            conn.execute(f"PRAGMA synchronous={sync}")
            _migrate(conn, path, create)
            if inline:  # batches on the loop never wait; the thread sets its wait
                conn.execute("PRAGMA busy_timeout = 0")
                # Nor do they copy the WAL back into the file (a checkpoint: about 12 ms
                # for a thousand pages here, fsyncs included): the writer thread does
                # (`GroupCommit`), when the WAL has grown that long. Cut back to nothing
                # once copied, the WAL's size is how much it holds.
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                conn.execute("PRAGMA journal_size_limit = 0")
            return conn
        except sqlite3.OperationalError as exc:
            # Turning a new file to WAL while another process writes it is refused at
            # once (SQLite does not wait where waiting could deadlock): ask again.
            if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY and (time.monotonic() < deadline):
                time.sleep(OPEN_RETRY_DELAY)
                continue
            conn.close()
            raise database_error(path, exc, "open") from None
        except sqlite3.Error as exc:
            conn.close()
            raise database_error(path, exc, "open") from None
        except JournalError:
            conn.close()
            raise


def open_to_read(path: Path) -> sqlite3.Connection:
    """The journal in a folder this process cannot write, opened read-only; as it is
    (SQLite's immutable mode) where the folder holds no shared-memory file (``-shm``),
    which WAL reads need and this process cannot make: on a read-only file system, or
    in a folder without write permission that no process has the journal open in (an
    open journal keeps its ``-shm``)."""
    wal = path.with_name(path.name + "-wal")
    frozen = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY) or not os.path.lexists(
        path.with_name(path.name + "-shm")
    )
    if frozen and wal.exists() and wal.stat().st_size > 0:
        raise JournalError(
            f"the journal {path} has changes in {wal.name} not yet in its file, and "
            f"{path.parent} is read-only, so they cannot be read. Copy the journal "
            "with its -wal file to a writable folder and read it there."
        )
    # Elsewhere (a journal open in a folder of another user) SQLite reads it as it reads
    # any WAL journal, or says why it cannot.
    try:
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?mode=ro{'&immutable=1' if frozen else ''}",
            uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
            check_same_thread=False,
        )  # fmt: skip
    except sqlite3.Error as exc:
        raise database_error(path, exc, "open") from None
    conn.text_factory = _text
    try:
        version = _schema_version(conn, path)
        if version == 0:
            raise NoJournal(
                f"{path} holds no toolbridge journal (nothing was created or "
                "changed). Check the path."
            )
        # Nothing is migrated here: a newer journal, or one too old to read, is refused.
        migrations_due(version, MIGRATIONS, create=False, where=str(path),
                       instead=_INSTEAD)  # fmt: skip
    except sqlite3.Error as exc:
        conn.close()
        raise database_error(path, exc, "open") from None
    except JournalError:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, path: Path, create: bool) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _schema_version(conn, path)
        due = migrations_due(version, MIGRATIONS, create=create,
                             where=str(path), instead=_INSTEAD)  # fmt: skip
        for number in due:
            for statement in statements(MIGRATIONS[number - 1]):
                conn.execute(statement)
        if create:  # opened to write: no migration, the version stays (see LISTING_INDEX)
            conn.execute(LISTING_INDEX)
        if due and version:
            logger.info(
                "journal %s: schema migrated from version %d to %d",
                path, version, SCHEMA_VERSION,
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


def database_error(path: Path, exc: sqlite3.Error, doing: str) -> JournalError:
    """What SQLite's `exc` means for the journal at `path` while `doing` something."""
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return JournalError(
            f"the journal {path} is corrupt or not a journal ({text}). Move it aside "
            "to start a new one; calls it recorded can then run again."
        )
    odd = _odd_side_file(path)
    if odd is not None:
        return JournalError(f"the journal {path} cannot {doing} ({text}): {odd}")
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        return JournalError(f"the journal {path} cannot {doing} ({text}): {why_not_writable(path)}")
    if "locked" in text or "busy" in text:
        return JournalError(
            f"the journal {path} stayed locked by another process for "
            f"{BUSY_TIMEOUT_MS // 1000} s while trying to {doing}; is a process stuck?"
        )
    if "full" in text:
        return JournalError(
            f"the disk holding the journal {path} is full ({text}); the call was "
            "not recorded. Free space, then retry."
        )
    if "disk I/O error" in text and _no_room(path):  # (growing its -shm file, say)
        return JournalError(
            f"the disk holding the journal {path} is full ({text}); free space, then retry."
        )
    return JournalError(
        f"the journal {path} failed to {doing}: {text}. Check the file and the disk "
        "it is on; move the file aside to start a new journal if it stays broken."
    )


def _odd_side_file(path: Path) -> str | None:
    """What is wrong with a side file SQLite makes for the journal at `path` (-wal, -shm)
    that is there but is no plain file (a folder, a link, a pipe), which SQLite reports
    only as a file it cannot open or an I/O error; None when both are fine."""
    for side in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            mode = os.lstat(side).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else (
                "a symbolic link" if stat.S_ISLNK(mode) else "not a plain file")  # fmt: skip
            return (
                f"its side file {side} is {what}. SQLite makes that file itself: remove it "
                "while no process has the journal open, then open the journal again."
            )
    return None


def _no_room(path: Path) -> bool:
    """Whether the disk of the journal at `path` has no room left for this process."""
    try:
        disk = os.statvfs(path.parent)
    except OSError:
        return False
    return disk.f_bavail == 0 or disk.f_bfree == 0


def os_error(path: Path, exc: OSError, doing: str) -> JournalError:
    """What the system's `exc` means for the journal at `path` while `doing` something."""
    if exc.errno == errno.ENOSPC:
        return JournalError(
            f"the disk holding the journal {path} is full ({exc.strerror}); free space, then retry."
        )
    if exc.errno == errno.ELOOP:
        return link_error(path.with_name(path.name + "-owners"))
    if exc.errno == errno.EACCES and exc.filename and not os.access(exc.filename, os.R_OK):
        return JournalError(
            f"the journal {path} cannot {doing}: {exc.filename} is not readable by this "
            "process (another user's, made for its owner only). Read the journal as the user "
            "that writes it (or root), or from a copy of the journal and its side files."
        )
    return JournalError(
        f"the journal {path} cannot {doing} ({exc.strerror}): {why_not_writable(path)}"
    )


def _text(data: bytes) -> str:
    """Stored text as `str`. Bytes that are not UTF-8 (a damaged row) arrive as lone
    surrogates, which `rows.loads` refuses: the call they are in fails, not the whole batch."""
    return data.decode("utf-8", "surrogateescape")


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "toolbridge_meta" not in tables:
        check_tables(tables, 0, SCHEMA_VERSION, str(path))
        if tables:
            raise JournalError(
                f"the SQLite file {path} holds other tables and no toolbridge journal; give "
                "the journal a file of its own"
            )
        return 0
    row = conn.execute("SELECT value FROM toolbridge_meta WHERE key = 'schema_version'").fetchone()
    version = schema_version_of(row[0] if row is not None else None, str(path))
    check_tables(tables, version, SCHEMA_VERSION, str(path))
    return version


def journal_path(value: str | os.PathLike[str]) -> Path:
    """`value` as the path of a journal's file; one no file can have (no file name, as
    ``/``, ``.`` or an empty string; a NUL byte), or that names a device, a pipe or a
    socket, is a `JournalError` that says so."""
    path = Path(value)
    if not path.name or "\0" in str(path):
        raise JournalError(
            f"{os.fspath(value)!r} is not the path of a journal file (it names no file, or "
            "holds a NUL byte). Give the path of the journal's file (a workspace's journal "
            "is <workspace>/.toolbridge/journal.sqlite3)."
        )
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return path  # nothing there (yet), or nothing this process may look at: SQLite says
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # (a folder: `why_not_writable`)
        raise JournalError(
            f"{path} is not a plain file (a device, a pipe, a socket), so it cannot hold a "
            "journal (it was left as it is). Give the path of the journal's file "
            "(a workspace's journal is <workspace>/.toolbridge/journal.sqlite3)."
        )
    return path


def why_not_writable(path: Path) -> str:
    """Why the journal at `path` cannot be created or written, and what to do about it."""
    folder = path.parent
    if path.is_dir():
        return (
            f"{path} is a folder, not a journal file. Give the path of the journal's file "
            "(a workspace's journal is <workspace>/.toolbridge/journal.sqlite3)."
        )
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        return (
            f"the folder {folder} {what}. Create it, or give the journal a path in a folder "
            "that exists."
        )
    if not os.access(folder, os.W_OK):
        return (
            f"{folder} is read-only for this process (a read-only file system, or no write "
            "permission), and the journal writes its file and side files (-wal, -shm, "
            "-owners) there. Make it writable, or keep the journal in a writable place "
            "(SQLiteJournal(path); --journal PATH or TOOLBRIDGE_JOURNAL on the command line)."
        )
    for name in (path.name, *(path.name + side for side in ("-wal", "-shm", "-owners"))):
        file = path.with_name(name)
        if file.exists() and not os.access(file, os.W_OK):
            return (
                f"the file {file} is read-only for this process (no write permission, or "
                "an immutable or read-only file), though its folder is writable. Make it "
                "writable (chmod u+w, or run as its owner), or keep the journal elsewhere "
                "(SQLiteJournal(path); --journal PATH or TOOLBRIDGE_JOURNAL on the command line)."
            )
    return "check that the file and its folder are readable and writable by this process."


def folder_error(path: Path, exc: OSError) -> JournalError:
    if exc.errno == errno.ENOSPC:
        return JournalError(
            f"the disk holding the journal {path} is full ({exc.strerror}); free space, then retry."
        )
    return JournalError(
        f"the journal folder {path.parent} cannot be created ({exc.strerror}): "
        f"{why_not_writable(path.parent)}"
    )


def link_error(path: Path) -> JournalError:
    return JournalError(
        f"the journal refuses {path}: it is a symbolic link (or not a plain file), and the "
        "journal of a workspace is opened without following links so that its writes cannot "
        "be pointed at another file. Remove it; the journal creates its own file."
    )


def refuse_links(path: Path) -> None:
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
            raise link_error(path.with_name(name))
