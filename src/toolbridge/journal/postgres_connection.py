"""Connecting to a PostgreSQL journal: the session settings, the tables created or migrated
under a lock, an owner number taken, and each way that fails said as a `JournalError` that
says what to do.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import TYPE_CHECKING, Any

from toolbridge.journal.base import Durability
from toolbridge.journal.migrations import (
    check_tables,
    migrations_due,
    schema_version_of,
    statements,
)
from toolbridge.journal.postgres_sql import TEXT_ARRAY_OID, TextArray
from toolbridge.journal.records import JournalError, NoJournal
from toolbridge.journal.rows import LISTING_INDEX

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "describe", "open_connection", "server_error"]

logger = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    # 1: calls
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
    # 2: runs of the agent loop, and pruning by age without a full scan
    """
    CREATE TABLE toolbridge_runs (
        session TEXT PRIMARY KEY, state JSONB NOT NULL, updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX toolbridge_calls_by_time ON toolbridge_calls (created_at);
    """,
    # 3: the owner of a running call in its row (version 2 held one advisory lock per call).
    # A call left running by version 2 has no owner: it is found interrupted. Stop every
    # process of the older version before the first one of this version opens the journal.
    """
    ALTER TABLE toolbridge_calls ADD COLUMN owner BIGINT;
    """,
    # 4: the states "queued" (claimed, waiting for a slot: its tool has not started) and
    # "refused" (refused before it ran, recorded for the audit), which version 3 cannot
    # read; no table changes. A version 3 process refuses the journal from here on, saying
    # it was written by a newer toolbridge, rather than misreading those rows.
    "",
)
SCHEMA_VERSION = len(MIGRATIONS)
"""The layout this toolbridge writes; older ones are migrated, newer ones refused."""

_KEEPALIVES = (("tcp_keepalives_idle", 10), ("tcp_keepalives_interval", 5),
               ("tcp_keepalives_count", 3))  # fmt: skip
"""The server's keepalives on a journal's connection: a lost host is noticed in ~25 s."""
_MIGRATION_LOCK = 0x746F6F6C62726467  # 'toolbrdg': one migrating process at a time


async def open_connection(
    conninfo: str, *, durability: Durability, create: bool
) -> tuple[AsyncConnection[Any], str, int]:
    """A connection to the journal at `conninfo`, its tables created or migrated, and this
    journal's owner number locked on it; with the description of the database for
    messages (no password)."""
    try:
        import psycopg
    except ImportError:
        raise JournalError(
            "the PostgreSQL journal needs psycopg: pip install 'toolbridge[postgres]'"
        ) from None
    description = describe(conninfo)
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    except psycopg.Error as exc:
        # libpq quotes the token of a string it cannot read (or the whole URI)
        reason = hide_passwords(str(exc), conninfo)
        raise JournalError(f"cannot connect to the journal at {description}: {reason}") from None
    send_text_arrays(conn)
    try:
        sync = "on" if durability == "power" else "off"
        await conn.execute(f"SET synchronous_commit = {sync}")
        # A host that dies (or is cut off) closes no socket: the server learns it from
        # keepalives, and only then lets go of the owner lock (ignored on a Unix socket).
        for setting, value in _KEEPALIVES:
            await conn.execute(f"SET {setting} = {value}")
        await _migrate(conn, description, create=create)
        if create:
            await _add_listing_index(conn, description)
        owner = await _take_owner_number(conn)
    except psycopg.Error as exc:
        await conn.close()
        raise server_error(exc, description) from None
    except BaseException:
        await conn.close()
        raise
    return conn, description, owner


def send_text_arrays(conn: AsyncConnection[Any]) -> None:
    """Let `conn` send a `TextArray` as it is: a binary ``text[]``, built already."""
    from psycopg.adapt import Buffer, Dumper
    from psycopg.pq import Format

    class TextArrayDumper(Dumper):
        format = Format.BINARY
        oid = TEXT_ARRAY_OID

        def dump(self, obj: Any) -> Buffer:
            data: bytes = obj
            return data

    conn.adapters.register_dumper(TextArray, TextArrayDumper)


async def _migrate(conn: AsyncConnection[Any], description: str, *, create: bool) -> None:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        cursor = await conn.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'toolbridge\\_%' "
            "AND relkind IN ('r', 'p') AND pg_table_is_visible(oid)"
        )
        tables = {row[0] for row in await cursor.fetchall()}
        version = 0
        if "toolbridge_meta" in tables:
            cursor = await conn.execute(
                "SELECT value FROM toolbridge_meta WHERE key = 'schema_version'"
            )
            found = await cursor.fetchone()
            version = schema_version_of(found[0] if found else None, f"at {description}")
        check_tables(tables, version, len(MIGRATIONS), f"at {description}")
        if version == 0 and not create:
            raise NoJournal(
                f"the database at {description} holds no toolbridge journal (nothing was "
                "created). Check the connection string."
            )
        due = migrations_due(version, MIGRATIONS, create=create, where=f"at {description}",
                             instead="another database")  # fmt: skip
        for number in due:
            for statement in statements(MIGRATIONS[number - 1]):
                await conn.execute(statement)
        if due:
            await conn.execute(
                "INSERT INTO toolbridge_meta VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            if version:
                logger.info("journal %s: schema migrated from %d", description, version)


_INDEX_NAME = "toolbridge_calls_by_session"
_INDEX_CONCURRENTLY = LISTING_INDEX.replace("CREATE INDEX", "CREATE INDEX CONCURRENTLY", 1)
_DEAD_BUILD_WAIT = "200ms"
"""How long dropping an invalid index waits for the table: a build under way holds it."""


async def _add_listing_index(conn: AsyncConnection[Any], description: str) -> None:
    """Make `LISTING_INDEX` if the journal has none, concurrently: a journal that holds
    many calls already (written by a toolbridge before the index) is indexed while other
    processes go on writing it, where a plain ``CREATE INDEX`` would hold their writes
    until it is built. One left invalid by a build that died (its process killed) is made
    again; one another process is building is left to it. A user that may write the
    tables but not index them (not their owner), or a read-only server, opens the journal
    as before: its listings are the same, only slower. Outside any transaction: a
    concurrent build cannot run inside one."""
    import psycopg

    cursor = await conn.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (_INDEX_NAME,)
    )
    row = await cursor.fetchone()
    if row is not None and row[0]:
        return
    try:
        if row is not None and not await _drop_dead_build(conn):
            return  # another process is building it
        await conn.execute(_INDEX_CONCURRENTLY)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
        pass  # another process began the same build at the same moment: it makes it
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as exc:
        logger.warning(
            "journal %s: cannot add the index that pages a session's listing (%s); "
            "listings of long sessions will be slower",
            description, str(exc).strip(),
        )  # fmt: skip


async def _drop_dead_build(conn: AsyncConnection[Any]) -> bool:
    """Drop the invalid listing index, unless a build under way holds the table (then
    False): a build that died leaves it behind, still written by every claim and never
    read."""
    import psycopg

    await conn.execute(f"SET lock_timeout = '{_DEAD_BUILD_WAIT}'")
    try:
        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_INDEX_NAME}")
    except psycopg.errors.LockNotAvailable:
        return False
    finally:
        await conn.execute("RESET lock_timeout")
    return True


def describe(conninfo: str) -> str:
    """The connection string without its password (nor its client key's, `sslpassword`),
    for messages."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        parts = conninfo_to_dict(conninfo)
        parts.pop("password", None)
        parts.pop("sslpassword", None)
        described = make_conninfo("", **{k: str(v) for k, v in parts.items() if v is not None})
    except Exception:
        return "(the configured PostgreSQL database)"
    return described or "(libpq's defaults: the PG* environment variables, else the local socket)"


_PASSWORDS = (
    re.compile(r"://[^:@/?#]*:([^@]*)@"),  # postgresql://user:password@host
    re.compile(r"[?&](?:ssl)?password=([^&#]*)"),  # ...?password=...
    re.compile(r"\b(?:ssl)?password\s*=\s*'((?:[^'\\]|\\.)*)"),  # password='...'
    re.compile(r"\b(?:ssl)?password\s*=\s*([^\s']\S*)"),  # password=...
)


def hide_passwords(text: str, conninfo: str) -> str:
    """`text` (a driver's message about `conninfo`) with every password `conninfo` holds,
    as written there, shown as ``***``: a string libpq cannot read is quoted in its
    message, and cannot be parsed to leave its password out (`describe`)."""
    found = {match[1] for pattern in _PASSWORDS for match in pattern.finditer(conninfo)}
    for password in sorted(filter(None, found), key=len, reverse=True):
        text = text.replace(password, "***")
    return text


def server_error(exc: Exception, description: str) -> JournalError:
    """What the server's (or the driver's) `exc` means for the journal at `description`."""
    text = str(exc).strip()
    if "No space left" in text or "disk full" in text:
        return JournalError(
            f"the disk of the journal database at {description} is full ({text}); the call "
            "was not recorded. Free space, then retry."
        )
    if "permission denied" in text or "must be owner" in text:
        return JournalError(
            f"this database user may not use the journal at {description} ({text}). Grant "
            "it the rights on the toolbridge_* tables (SELECT to read them; to record calls, "
            "the rights to create and write them), or connect as a user that has them."
        )
    if "read-only transaction" in text:
        return JournalError(
            f"the journal at {description} is on a read-only server ({text}): connect to "
            "the primary, not a standby."
        )
    return JournalError(
        f"the journal at {description} failed: {text}. Check that the server is up and "
        "reachable, then retry."
    )


async def _take_owner_number(conn: AsyncConnection[Any]) -> int:
    """A random owner number this connection holds the advisory lock of until it closes."""
    while True:
        owner = secrets.randbits(63)
        cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (owner,))
        row = await cursor.fetchone()
        if row is not None and row[0]:
            return owner
