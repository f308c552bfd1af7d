"""A session's listing read a page at a time (`iter_entries`: `journal show` and `export`)
seeks each page in an index, on a real SQLite file and a real PostgreSQL server: each page
reads its own rows in order, where it used to sort the session's remaining rows (a
session's export read the session once per page). The index is made when a journal is
opened to write, without a new schema version; a journal without it (written before it
was, read where it cannot be written) lists the same. Plans are checked, never times.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from tests.journal.conftest import immutable
from tests.journal.pg_plans import AUTO_EXPLAIN

from toolbridge.journal import JournalEntry, SQLiteJournal, open_journal
from toolbridge.journal import postgres_connection as pg_journal
from toolbridge.journal import sqlite_file as sqlite_journal
from toolbridge.journal.postgres import PostgresJournal

INDEX = "toolbridge_calls_by_session"
SESSIONS = ("a", "b", "c")


def rows() -> list[tuple[object, ...]]:
    """Finished calls of three sessions, interleaved in time, four calls sharing each time
    (a batch's claims share theirs on PostgreSQL), ids that sort the same in Python,
    SQLite and a C-collated PostgreSQL."""
    made = []
    for n in range(60):
        session = SESSIONS[n % 3]
        outcome = '{"text": "ok"}'
        made.append((session, f"call-{n:02d}", f"h{n % 2}", "t", '{"n": 1}', "finished", 1,
                     outcome, None, None, 1000.0 + n // 4, 1000.0, 1001.0, None))  # fmt: skip
    return made


INSERT = "INSERT INTO toolbridge_calls VALUES (" + ", ".join(["?"] * 14) + ")"


def listing_key(entry: JournalEntry) -> tuple[float, str, str, str]:
    return (entry.created_at, *entry.key)


def write_version_4(target: str, *, with_rows: bool = True) -> None:
    """A journal as toolbridge wrote schema version 4 before the index: its migrations'
    tables and version, and `rows()`."""
    if target.startswith("postgresql://"):
        with psycopg.connect(target, autocommit=True) as conn:
            for script in pg_journal.MIGRATIONS:
                for statement in filter(None, (part.strip() for part in script.split(";"))):
                    conn.execute(statement)  # type: ignore[call-overload]
            conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '4')")
            if with_rows:
                with conn.cursor() as cursor:
                    cursor.executemany(INSERT.replace("?", "%s"), rows())
        return
    conn = sqlite3.connect(target)
    conn.executescript("".join(sqlite_journal.MIGRATIONS))
    conn.execute("INSERT INTO toolbridge_meta VALUES ('schema_version', '4')")
    if with_rows:
        conn.executemany(INSERT, rows())
    conn.commit()
    conn.close()


def indexes_and_version(target: str) -> tuple[set[str], str]:
    if target.startswith("postgresql://"):
        with psycopg.connect(target) as conn:
            names = conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'toolbridge_calls'"
            ).fetchall()
            version = conn.execute("SELECT value FROM toolbridge_meta").fetchone()
    else:
        conn = sqlite3.connect(target)
        names = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'toolbridge_calls'"
        ).fetchall()
        version = conn.execute("SELECT value FROM toolbridge_meta").fetchone()
        conn.close()
    assert version is not None
    return {str(name) for (name,) in names}, str(version[0])


async def assert_pages_list_as_one(target: str, *, create: bool) -> None:
    """Every page of every session, from every entry on (of its own session or another),
    holds the rows a sort of the whole listing says it does, in that order."""
    async with await open_journal(target, create=create) as journal:
        everything = await journal.entries()
        assert len(everything) == 60
        assert [listing_key(e) for e in everything] == sorted(map(listing_key, everything))
        for session in (*SESSIONS, None):
            mine = [e for e in everything if session is None or e.key.session == session]
            for page in (1, 3, 7, 100):
                read = [e async for e in journal.iter_entries(session=session, page=page)]
                assert [e.key for e in read] == [e.key for e in mine], (session, page)
            for after in everything:
                rest = await journal.entries(session=session, after=after, limit=5)
                wanted = [e for e in mine if listing_key(e) > listing_key(after)][:5]
                assert [e.key for e in rest] == [e.key for e in wanted], (session, after.key)


@contextmanager
def sqlite_statements(journal: SQLiteJournal) -> Iterator[list[str]]:
    """The statements the journal's connection runs inside the block, values written in."""
    seen: list[str] = []
    journal._conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        journal._conn.set_trace_callback(None)


def sqlite_plan(path: Path, statement: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}"))
    finally:
        conn.close()


async def test_a_session_page_on_sqlite_seeks_the_index_and_sorts_nothing(tmp_path: Path) -> None:
    db = tmp_path / "journal.sqlite3"
    await SQLiteJournal(db).close()  # opened to write: the tables and the index
    with sqlite3.connect(db) as conn:
        conn.executemany(INSERT, rows())
    conn.close()
    async with SQLiteJournal(db) as journal:
        with sqlite_statements(journal) as seen:
            first = await journal.entries(session="b", limit=4)
            second = await journal.entries(session="b", limit=4, after=first[-1])
        assert [e.key.call_id for e in first + second] == [f"call-{n:02d}" for n in
                                                            range(1, 24, 3)]  # fmt: skip
    listings = [text for text in seen if text.lstrip().startswith("SELECT")]
    assert len(listings) == 2, seen
    for statement in listings:
        plan = sqlite_plan(db, statement)
        assert "TEMP B-TREE" not in plan, plan
        assert f"USING INDEX {INDEX} (session=?" in plan, plan
    # The second page starts at its first row: the seek holds every column it compares.
    assert "(created_at,call_id,args_hash)>(?,?,?)" in sqlite_plan(db, listings[1])


async def test_a_journal_written_before_the_index_gets_it_when_opened_to_write(
    journal_target: str,
) -> None:
    write_version_4(journal_target)
    # Opened only to read, it is read as it is: no index made, the same listing.
    await assert_pages_list_as_one(journal_target, create=False)
    assert INDEX not in indexes_and_version(journal_target)[0]
    # Opened to write: the index is made and the schema version stays, so an older
    # toolbridge still opens it (it refuses only a newer version).
    async with await open_journal(journal_target):
        pass
    names, version = indexes_and_version(journal_target)
    assert INDEX in names and version == "4"
    await assert_pages_list_as_one(journal_target, create=False)
    async with await open_journal(journal_target):  # opened again: made once, kept
        pass
    assert INDEX in indexes_and_version(journal_target)[0]


async def test_an_older_toolbridge_writes_a_journal_that_has_the_index(tmp_path: Path) -> None:
    # What a version 4 process does with its own SQL (no index in its migrations): its
    # claims go in and the index holds them, so this version's pages find them.
    db = tmp_path / "journal.sqlite3"
    write_version_4(str(db), with_rows=False)
    await SQLiteJournal(db).close()
    conn = sqlite3.connect(db)
    conn.executemany(INSERT, rows())
    conn.commit()
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    await assert_pages_list_as_one(str(db), create=True)


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a version 4 journal without the index, then made immutable."""
    folder = tmp_path / "audit"
    folder.mkdir()
    write_version_4(str(folder / "journal.sqlite3"))
    with immutable(folder):
        yield folder


async def test_a_journal_that_cannot_be_written_is_paged_without_the_index(
    unwritable: Path,
) -> None:
    db = unwritable / "journal.sqlite3"
    await assert_pages_list_as_one(str(db), create=False)
    assert INDEX not in indexes_and_version(str(db))[0]
    # It sorts each page instead: correct, only slower.
    async with SQLiteJournal(db, create=False) as journal:
        assert journal._reader
        with sqlite_statements(journal) as seen:
            await journal.entries(session="a", limit=4)
    (listing,) = [text for text in seen if text.lstrip().startswith("SELECT")]
    assert "TEMP B-TREE" in sqlite_plan(db, listing)


FILL = (
    "INSERT INTO toolbridge_calls SELECT CASE WHEN i % 100 = 0 THEN 'big' "
    "ELSE 'other-' || (i / 100) END, 'call-' || i, md5(i::text), 'tool', '{\"n\": 1}'::jsonb, "
    "'finished', 1, '{\"text\": \"ok\"}'::jsonb, NULL, NULL, 1e9 + i / 100, 1e9, 1e9, NULL "
    "FROM generate_series(1, 100000) AS i"
)
"""100,000 finished calls: a long session ("big", 1,000 calls) that is one call in a hundred
of its time (busy with 990 other sessions of 99 to 100 calls each), a time per hundred
calls."""


@pytest.fixture
async def busy(postgres_url: str) -> AsyncIterator[tuple[PostgresJournal, list[str]]]:
    """A journal of `FILL`, analyzed, whose connection has the server send the plan of each
    statement it runs back as a notice; with the plans heard."""
    opened = await open_journal(f"{postgres_url}&options={quote(AUTO_EXPLAIN)}")
    assert isinstance(opened, PostgresJournal)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(FILL)  # type: ignore[arg-type]
        conn.execute("ANALYZE toolbridge_calls")
    seen: list[str] = []

    def heard(notice: psycopg.errors.Diagnostic) -> None:
        text = notice.message_primary or ""
        if "plan:" in text and "toolbridge_calls" in text:
            seen.append(text)

    opened._conn.add_notice_handler(heard)
    try:
        yield opened, seen
    finally:
        opened._conn.remove_notice_handler(heard)
        await opened.close()


async def test_a_session_page_on_postgresql_seeks_the_index_and_sorts_nothing(
    busy: tuple[PostgresJournal, list[str]],
) -> None:
    # Without the index the server reads the journal by time and keeps the session's rows:
    # a page of 50 read some 5,000 rows of the other sessions (not quadratic, but a hundred
    # times the page). 20 pages and the last, empty one: psycopg prepares the statement on
    # its sixth run and the server may keep a generic plan after five more; both are checked.
    journal, seen = busy
    read = [entry async for entry in journal.iter_entries(session="big", page=50)]
    assert len(read) == 1_000 == len({entry.key for entry in read})
    assert [listing_key(e) for e in read] == sorted(map(listing_key, read))
    assert len(seen) == 21, len(seen)
    for plan in seen:
        assert "Sort" not in plan, plan
        assert f"Index Scan using {INDEX} on toolbridge_calls" in plan, plan


async def test_a_postgresql_user_that_may_not_index_the_table_still_opens_the_journal(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A user granted the rows but not the table (only its owner may index it) opened a
    # version 4 journal to write before the index existed; it still does, and lists.
    write_version_4(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS journal_writer")
        conn.execute("CREATE ROLE journal_writer LOGIN")
        conn.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO journal_writer"
        )
    as_writer = postgres_url.replace("postgresql://postgres@", "postgresql://journal_writer@")
    assert as_writer != postgres_url
    async with await open_journal(as_writer) as journal:
        assert len(await journal.entries(session="b")) == 20
    assert INDEX not in indexes_and_version(postgres_url)[0]
    assert "cannot add the index that pages a session's listing" in caplog.text
    await assert_pages_list_as_one(as_writer, create=True)


def listing_index_state(target: str) -> tuple[bool, str] | None:
    """Whether the listing index is valid, and its definition; None where there is none."""
    with psycopg.connect(target) as conn:
        row = conn.execute(
            "SELECT indisvalid, pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indexrelid = to_regclass(%s)",
            (INDEX,),
        ).fetchone()
    return None if row is None else (bool(row[0]), str(row[1]))


def a_call(call_id: str) -> tuple[object, ...]:
    return ("a", call_id, "h", "t", '{"n": 1}', "running", 1, None, None, None, 2000.0, 2000.0,
            None, None)  # fmt: skip


async def test_a_postgresql_journal_is_indexed_while_other_processes_write_it(
    postgres_url: str,
) -> None:
    # The first open of a journal written before the index builds it. A plain CREATE INDEX
    # queued behind one open write and held every other writer behind it until built (on
    # a journal of millions of calls, every agent process on it stood still). Built
    # concurrently, it waits for that write alone, and the others go on.
    write_version_4(postgres_url)
    insert = INSERT.replace("?", "%s")
    connect = psycopg.AsyncConnection.connect
    async with (  # (`older` last: closed first, it lets the others go should a check fail)
        await connect(postgres_url, autocommit=True) as watch,
        await connect(postgres_url, autocommit=True) as writer,
        await connect(postgres_url, autocommit=True) as older,
    ):

        async def waiting(pid: int | None = None) -> bool:
            cursor = await watch.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND (%s::int IS NULL OR pid = %s)",
                (pid, pid),
            )
            row = await cursor.fetchone()
            return row is not None and row[0] > 0

        await older.execute("BEGIN")
        await older.execute(insert, a_call("older"))  # an older process's claim, not committed
        opening = asyncio.create_task(open_journal(postgres_url))
        while not await waiting():  # the build waits for that claim's transaction
            assert not opening.done(), opening
            await asyncio.sleep(0.01)
        writing = asyncio.create_task(writer.execute(insert, a_call("meanwhile")))
        while not writing.done():
            assert not await waiting(writer.info.backend_pid), "the claim waits for the build"
            await asyncio.sleep(0.01)
        await writing
        assert not opening.done()
        await older.execute("COMMIT")
        journal = await opening
    try:
        assert len(await journal.entries(session="a")) == 22
    finally:
        await journal.close()
    state = listing_index_state(postgres_url)
    assert state is not None and state[0], state


async def test_an_index_a_dead_build_left_invalid_is_made_again(postgres_url: str) -> None:
    # A build that died half-way (its process killed; here a unique index over repeated
    # values) leaves an invalid index: written by every claim, read by no listing.
    write_version_4(postgres_url)
    with (
        psycopg.connect(postgres_url, autocommit=True) as conn,
        pytest.raises(psycopg.errors.UniqueViolation),
    ):
        conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {INDEX} ON toolbridge_calls (tool)")
    assert listing_index_state(postgres_url) == (
        False, f"CREATE UNIQUE INDEX {INDEX} ON public.toolbridge_calls USING btree (tool)"
    )  # fmt: skip
    async with await open_journal(postgres_url):
        pass
    assert listing_index_state(postgres_url) == (
        True,
        f"CREATE INDEX {INDEX} ON public.toolbridge_calls "
        "USING btree (session, created_at, call_id, args_hash)",
    )
    await assert_pages_list_as_one(postgres_url, create=False)


async def test_an_index_another_process_is_building_is_left_to_it(postgres_url: str) -> None:
    # Not yet valid while another process builds it, which holds the table meanwhile (here
    # a transaction holds it as a build does): the journal opens without waiting for it.
    write_version_4(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {INDEX} ON toolbridge_calls (tool)")
        with conn.transaction():
            conn.execute("LOCK TABLE toolbridge_calls IN SHARE UPDATE EXCLUSIVE MODE")
            async with await open_journal(postgres_url) as journal:
                assert len(await journal.entries(session="a")) == 20
    state = listing_index_state(postgres_url)
    assert state is not None and not state[0], state
