"""The call journal: no tool call lost or run twice across crashes, restarts and retries.

Every call the executor runs is claimed in the journal before it runs (queued while it
waits for a slot, running once its tool starts) and its outcome is stored, durably, before
the outcome is returned. A call that finished is replayed, not run again; a call whose
tool started in a process that died is reported as interrupted, one that was still queued
runs. Calls refused before running are recorded too. SQLite in the workspace by default;
PostgreSQL (the ``postgres`` extra) when processes or hosts share it.
"""

import re
from urllib.parse import unquote, urlsplit

from toolbridge.journal.base import CallJournal, Durability
from toolbridge.journal.records import (
    CallKey,
    CallState,
    Claim,
    ClaimAction,
    JournalEntry,
    JournalError,
    SessionInUse,
)
from toolbridge.journal.sqlite import SQLiteJournal

__all__ = [
    "CallJournal",
    "CallKey",
    "CallState",
    "Claim",
    "ClaimAction",
    "Durability",
    "JournalEntry",
    "JournalError",
    "SQLiteJournal",
    "SessionInUse",
    "open_journal",
]


_CONNINFO = re.compile(r"^\s*[a-z_]+\s*=")


async def open_journal(
    target: str, *, durability: Durability = "process", create: bool = True
) -> CallJournal:
    """A journal from a file path (SQLite), or a ``postgresql://`` URL or a libpq
    ``key=value`` connection string (PostgreSQL). `create` False opens an existing journal
    only: where there is none, a `JournalError` says so and nothing is created."""
    if target.startswith(("postgresql://", "postgres://")) or _CONNINFO.match(target):
        from toolbridge.journal.postgres import PostgresJournal

        return await PostgresJournal.connect(target, durability=durability, create=create)
    path = _sqlite_path(target) if target.startswith("sqlite:") else target
    return SQLiteJournal(path, durability=durability, create=create)


def _sqlite_path(url: str) -> str:
    """The file a ``sqlite:`` URL names, read as a URL: ``sqlite:///abs/path`` is
    ``/abs/path`` (its leading ``/`` was dropped: a relative path), ``sqlite:rel/path``
    is relative; percent escapes are decoded."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment or not parts.path:
        raise JournalError(
            f"{url!r} is not a SQLite file URL: write sqlite:///absolute/path (or give the "
            "file's path itself)"
        )
    return unquote(parts.path)
