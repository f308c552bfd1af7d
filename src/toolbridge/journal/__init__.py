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
    ClaimRequest,
    JournalEntry,
    JournalError,
    NoJournal,
    SessionInUse,
)
from toolbridge.journal.sqlite import SQLiteJournal

__all__ = [
    "CallJournal",
    "CallKey",
    "CallState",
    "Claim",
    "ClaimAction",
    "ClaimRequest",
    "Durability",
    "JournalEntry",
    "JournalError",
    "NoJournal",
    "SQLiteJournal",
    "SessionInUse",
    "open_journal",
]


_CONNINFO = re.compile(r"^\s*[a-z_]+\s*=")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: not C:\
_TARGETS = "a SQLite file's path, a sqlite:///absolute/path URL, or a postgresql:// URL"


async def open_journal(
    target: str, *, durability: Durability = "process", create: bool = True
) -> CallJournal:
    """A journal from a file path or a ``sqlite:`` URL (SQLite), or a ``postgresql://``
    URL or a libpq ``key=value`` connection string (PostgreSQL). Any other ``scheme:``
    prefix is a `JournalError`, not a file of that name (write ``./a:b`` for one). `create`
    False opens an existing journal only: where there is none, a `JournalError` says so
    and nothing is created."""
    found = _SCHEME.match(target)
    scheme = found.group(1).lower() if found else ""
    if scheme in ("postgresql", "postgres") or (not scheme and _CONNINFO.match(target)):
        if scheme and not target[len(scheme) + 1 :].startswith("//"):
            raise _not_a_target(target)
        target = scheme + target[len(scheme) :]  # libpq reads the scheme in lower case
        from toolbridge.journal.postgres import PostgresJournal

        return await PostgresJournal.connect(target, durability=durability, create=create)
    if scheme == "sqlite":
        return SQLiteJournal(_sqlite_path(target), durability=durability, create=create)
    if scheme:
        raise _not_a_target(target)
    return SQLiteJournal(target, durability=durability, create=create)


def _not_a_target(target: str) -> JournalError:
    return JournalError(
        f"{target!r} is not a journal toolbridge can open: give {_TARGETS} (a file whose "
        f"name holds ':' as ./{target})"
    )


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
