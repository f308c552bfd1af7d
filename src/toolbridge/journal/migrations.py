"""A journal's schema version, and what opening it does about it, the same on both backends.

A journal newer than this toolbridge is refused; an older one is migrated, one numbered
script after another, unless it is opened only to read: then it is read as it is, if it
can be. A backend reads the stored version and runs the scripts in its own transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from toolbridge.journal.records import JournalError

__all__ = [
    "READABLE_AS_IS",
    "TABLES",
    "check_readable_as_is",
    "check_tables",
    "migrations_due",
    "newer_schema",
    "schema_version_of",
    "statements",
]


READABLE_AS_IS = 3
"""The oldest schema version read without migrating it: version 3 has every table and
column of version 4, which added states only."""


def check_readable_as_is(version: int, where: str) -> None:
    """A journal opened only to read (``create=False``) is never migrated: a write by a read
    command would make the older processes still using it refuse it as newer. Refuse one
    too old to read as it is (a `JournalError` naming `where`)."""
    if version < READABLE_AS_IS:
        raise JournalError(
            f"the journal {where} is schema version {version}, written by an older "
            "toolbridge, and a command that only reads it does not migrate it. Stop the "
            "older processes that use it, then open it once with this toolbridge to write "
            "(a run with this journal migrates it)."
        )


def schema_version_of(value: Any, where: str) -> int:
    """The stored schema version (None: its row is missing, which every version of the
    journal writes with its tables); a damaged one is a `JournalError` naming `where`."""
    try:
        version = int(value)
    except (TypeError, ValueError):
        version = -1
    if version < 1:
        found = (
            "it has no schema version"
            if value is None
            else (f"its schema version is {value!r}, not a version number")
        )
        raise JournalError(
            f"the journal {where} is damaged: {found}. Restore it from a backup, or move "
            "it aside to start a new one (calls it recorded can then run again)."
        )
    return version


TABLES = {"toolbridge_calls": 1, "toolbridge_runs": 2}
"""The tables the migrations make besides ``toolbridge_meta``, and the version that made each."""


def check_tables(tables: Collection[str], version: int, latest: int, where: str) -> None:
    """Refuse (a `JournalError` naming `where`) a journal without a table its schema
    `version` has: toolbridge's tables with no ``toolbridge_meta`` (`version` 0), or, up to
    version `latest`, a table a migration made that is gone. (A newer toolbridge's layout is
    its own business: that journal is refused as newer.)"""
    if version == 0:
        missing = ["toolbridge_meta"] if any(table in tables for table in TABLES) else []
    else:
        missing = [table for table, since in TABLES.items()
                   if since <= version <= latest and table not in tables]  # fmt: skip
    if missing:
        raise JournalError(
            f"the journal {where} is damaged: its table {missing[0]} is missing. Restore it "
            "from a backup, or move it aside to start a new one (calls it recorded can "
            "then run again)."
        )


def newer_schema(where: str, version: int, latest: int, instead: str) -> JournalError:
    """The error of a journal (`where`) a newer toolbridge wrote; `instead` is what to give
    this one (another journal file, another database)."""
    return JournalError(
        f"the journal {where} was written by a newer toolbridge (schema version {version}; "
        f"this one reads up to {latest}). Upgrade toolbridge, or give this one {instead}."
    )


def migrations_due(
    version: int, migrations: Sequence[str], *, create: bool, where: str, instead: str
) -> range:
    """The numbers of the `migrations` a journal at schema `version` needs: none when it
    is current, or opened only to read (`create` False: an older one is read as it is, if
    it can be). A newer journal, or one too old to read as it is, is a `JournalError`."""
    latest = len(migrations)
    if version > latest:
        raise newer_schema(where, version, latest, instead)
    if not create and version < latest:
        check_readable_as_is(version, where)
        return range(0)
    return range(version + 1, latest + 1)


def statements(script: str) -> list[str]:
    """The statements of a migration script, one by one."""
    return [part.strip() for part in script.split(";") if part.strip()]
