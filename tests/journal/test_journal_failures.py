"""Every failure of the journal is a `JournalError` that names the file or server and says
what to do; commands that only read an existing journal create nothing where there is none;
the workspace's journal is opened without following links. Real files, a real read-only
file system (tmpfs), a real PostgreSQL server, the CLI as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.journal.conftest import immutable

from toolbridge.journal import CallKey, JournalError, NoJournal, SQLiteJournal, open_journal

KEY = CallKey("s", "c", "h")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", *args],
        cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def make_journal(target: str) -> None:
    async with await open_journal(target) as journal:
        await journal.claim(KEY, "t", {})
        await journal.finish(KEY, {"text": "ok"})


def set_version(target: str, value: str) -> None:
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("UPDATE toolbridge_meta SET value = %s WHERE key = 'schema_version'",
                         (value,))  # fmt: skip
        return
    with sqlite3.connect(target) as conn:
        conn.execute("UPDATE toolbridge_meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.close()


@pytest.mark.parametrize("value", ["x", "", "-3"])
async def test_a_damaged_schema_version_is_a_journal_error_naming_the_journal(
    journal_target: str, value: str
) -> None:
    # int(row[0]) raised ValueError: the CLI said "internal error" (exit 4).
    await make_journal(journal_target)
    set_version(journal_target, value)
    with pytest.raises(JournalError, match="damaged: its schema version is") as raised:
        await open_journal(journal_target)
    where = Path(journal_target).name if "://" not in journal_target else "dbname="
    assert where in str(raised.value) and "move it aside" in str(raised.value)


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs, made read-only by the test with `remount`."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, f"mounting a tmpfs needs root: {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def remount_read_only(mount: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)


def test_a_read_only_workspace_is_a_journal_error_that_says_why(read_only_mount: Path) -> None:
    # It was a raw PermissionError/OSError from mkdir.
    remount_read_only(read_only_mount)
    with pytest.raises(JournalError) as raised:
        SQLiteJournal.in_workspace(read_only_mount)
    text = str(raised.value)
    assert str(read_only_mount) in text and "read-only" in text and "writable" in text


async def test_a_journal_on_a_read_only_disk_says_why_and_what_to_do(
    read_only_mount: Path,
) -> None:
    # It said only "unable to open database file".
    journal = SQLiteJournal.in_workspace(read_only_mount)
    await journal.claim(KEY, "t", {})
    await journal.finish(KEY, {"text": "ok"})
    await journal.close()
    remount_read_only(read_only_mount)
    with pytest.raises(JournalError) as raised:
        SQLiteJournal.in_workspace(read_only_mount)
    text = str(raised.value)
    assert f"{read_only_mount}/.toolbridge/journal.sqlite3" in text
    assert "read-only" in text and "Make it writable" in text


@pytest.mark.parametrize("command", [["list"], ["show", "s"], ["export"], ["prune",
                                     "--keep-sessions", "0"]])  # fmt: skip
def test_commands_on_a_path_with_no_journal_say_so_and_create_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    # `journal list --journal typo.sqlite3` created an empty journal (and its side file)
    # and reported no calls.
    done = run_cli(*command, "--journal", "typo.sqlite3", cwd=tmp_path)
    assert done.returncode == 2  # a missing file, as without --journal (it was 3)
    assert "no journal at typo.sqlite3" in done.stderr and "Traceback" not in done.stderr
    assert os.listdir(tmp_path) == []
    empty = tmp_path / "empty.sqlite3"  # a file that is not a journal: left as it was
    empty.touch()
    done = run_cli(*command, "--journal", str(empty), cwd=tmp_path)
    assert done.returncode == 2  # no journal there, as for a missing file (it was 3)
    assert f"{empty} holds no toolbridge journal" in done.stderr
    assert os.listdir(tmp_path) == ["empty.sqlite3"] and empty.stat().st_size == 0


def test_commands_on_a_database_with_no_journal_create_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    import psycopg

    done = run_cli("list", "--journal", postgres_url, cwd=tmp_path)
    assert done.returncode == 2 and "holds no toolbridge journal" in done.stderr  # it was 3
    with psycopg.connect(postgres_url) as conn:
        cursor = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'toolbridge%'")
        assert cursor.fetchone() == (0,)


async def test_reading_with_create_false_opens_an_existing_journal(journal_target: str) -> None:
    await make_journal(journal_target)
    async with await open_journal(journal_target, create=False) as journal:
        [entry] = await journal.entries()
        assert entry.outcome == {"text": "ok"}


@pytest.mark.parametrize("name", ["journal.sqlite3", "journal.sqlite3-wal",
                                  "journal.sqlite3-owners"])  # fmt: skip
def test_a_link_planted_in_the_control_folder_is_refused(tmp_path: Path, name: str) -> None:
    workspace = tmp_path / "workspace"
    (workspace / ".toolbridge").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("not yours\n")
    (workspace / ".toolbridge" / name).symlink_to(victim)
    with pytest.raises(JournalError, match="symbolic link") as raised:
        SQLiteJournal.in_workspace(workspace)
    assert f".toolbridge/{name}" in str(raised.value)
    assert victim.read_text() == "not yours\n"
    assert sorted(os.listdir(workspace / ".toolbridge")) == [name]


def test_a_linked_control_folder_is_refused(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / ".toolbridge").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(JournalError, match="not a directory"):
        SQLiteJournal.in_workspace(workspace)
    assert os.listdir(elsewhere) == []


def test_the_cli_refuses_a_linked_journal_too(tmp_path: Path) -> None:
    (tmp_path / ".toolbridge").mkdir()
    victim = tmp_path / "victim.sqlite3"
    asyncio.run(make_journal(str(victim)))
    (tmp_path / ".toolbridge" / "journal.sqlite3").symlink_to(victim)
    done = run_cli("list", cwd=tmp_path)
    assert done.returncode != 0 and "symbolic link" in done.stderr


async def test_a_database_user_without_rights_gets_a_journal_error_that_says_what_to_do(
    postgres_url: str,
) -> None:
    import psycopg

    role = f"no_rights_{os.getpid()}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # PostgreSQL 15: no CREATE on public
    url = postgres_url.replace("postgresql://postgres@", f"postgresql://{role}@")
    try:
        with pytest.raises(JournalError) as raised:
            await open_journal(url)
        text = str(raised.value)
        assert f"user={role}" in text and "permission denied" in text
        assert "Grant it the rights" in text
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


def test_a_journal_on_a_full_disk_says_the_disk_is_full(small_disk: Path) -> None:
    """Opening a journal on a disk with no room left (SQLite cannot make its -shm file)
    failed as a 'disk I/O error' that said to move the journal aside, which loses its
    records, rather than that the disk is full (found by the hostile re-check)."""
    from tests.journal.disk import fill_up

    path = small_disk / "j.sqlite3"

    async def one_call() -> None:
        async with SQLiteJournal(path) as journal:
            key = CallKey("s", "c", "h")
            await journal.claim(key, "t", {})
            await journal.finish(key, {"content": "ok", "is_error": False})

    asyncio.run(one_call())
    fill_up(small_disk / "filler")
    with pytest.raises(JournalError, match="is full") as raised:
        asyncio.run(one_call())
    assert "move" not in str(raised.value), raised.value
    for command in (["list"], ["show", "s"], ["export"]):
        done = subprocess.run(
            [sys.executable, "-m", "toolbridge", "journal", *command, "--journal", str(path)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 3, done
        assert f"the disk holding the journal {path} is full" in done.stderr, done.stderr
        assert "free space" in done.stderr and "move" not in done.stderr, done.stderr


@pytest.fixture
def immutable_journal(tmp_path: Path) -> Iterator[Path]:
    """A closed journal whose file (not its folder) is made immutable: no process, root
    included, may write it, while its folder stays writable."""
    path = tmp_path / "journal.sqlite3"
    asyncio.run(make_journal(str(path)))
    with immutable(path):
        yield path


async def test_a_read_only_journal_file_in_a_writable_folder_is_named_not_its_folder(
    immutable_journal: Path,
) -> None:
    # The error said "<folder> is read-only for this process ... Make it writable": the
    # folder was writable; the file was not.
    with pytest.raises(JournalError) as raised:
        async with SQLiteJournal(immutable_journal) as journal:
            await journal.claim(CallKey("s", "c2", "h"), "t", {})
    text = str(raised.value)
    assert f"the file {immutable_journal} is read-only" in text
    assert f"{immutable_journal.parent} is read-only" not in text and "chmod u+w" in text


def test_a_target_holding_no_journal_is_no_journal_as_a_missing_file_is(
    journal_target: str,
) -> None:
    # An empty SQLite file or an empty database raised a plain JournalError, so a caller
    # (and the CLI's exit code) told it apart from "no journal at PATH".
    if "://" not in journal_target:
        Path(journal_target).touch()
    with pytest.raises(NoJournal, match="holds no toolbridge journal"):
        asyncio.run(open_journal(journal_target, create=False))


async def test_a_database_user_who_may_not_read_the_journal_is_told_to_get_read_rights(
    postgres_url: str,
) -> None:
    # A read (create=False, as `journal show` opens it) said the journal "is not writable
    # by this database user" and to grant the rights "to create and write" the tables: a
    # read-only auditor needs SELECT, which that never named.
    import psycopg

    await make_journal(postgres_url)
    role = f"no_select_{os.getpid()}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
    url = postgres_url.replace("postgresql://postgres@", f"postgresql://{role}@")
    try:
        with pytest.raises(JournalError) as raised:
            async with await open_journal(url, create=False) as journal:
                await journal.entries()
        text = str(raised.value)
        assert f"user={role}" in text and "permission denied" in text
        assert "not writable" not in text and "SELECT" in text
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize(("side", "make"), [
    ("-wal", os.mkdir), ("-shm", os.mkdir), ("-shm", os.mkfifo),
    ("-wal", lambda path: os.symlink("/etc/hostname", path)),
])  # fmt: skip
async def test_a_side_file_that_is_no_plain_file_is_named(
    tmp_path: Path, side: str, make: Callable[[Path], None]
) -> None:
    # SQLite said "unable to open database file" (or "disk I/O error"), and the journal
    # said to check that the file and folder are writable (or to move the journal aside,
    # losing its records), while both were fine and the side file was the problem.
    path = tmp_path / "journal.sqlite3"
    await make_journal(str(path))
    make(tmp_path / f"journal.sqlite3{side}")
    for create in (True, False):
        with pytest.raises(JournalError) as raised:
            async with await open_journal(str(path), create=create) as journal:
                await journal.entries()
        text = str(raised.value)
        assert f"its side file {path}{side} is" in text and "remove it" in text
        assert "move the file aside" not in text and "readable and writable" not in text


def drop_table(target: str, table: str) -> None:
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {table}")
        return
    with sqlite3.connect(target) as conn:
        conn.execute(f"DROP TABLE {table}")
    conn.close()


@pytest.mark.parametrize("table", ["toolbridge_calls", "toolbridge_runs", "toolbridge_meta"])
@pytest.mark.parametrize("create", [True, False])
async def test_a_journal_missing_one_of_its_tables_is_damaged_on_both_backends(
    journal_target: str, table: str, create: bool
) -> None:
    # On PostgreSQL a dropped table was found only by the first statement that used it:
    # "relation ... does not exist. Check that the server is up and reachable" (and, with
    # toolbridge_meta gone, a write tried to make the tables again: "... already exists").
    # SQLite said toolbridge_meta's absence meant "other tables": they are the journal's.
    await make_journal(journal_target)
    drop_table(journal_target, table)
    with pytest.raises(JournalError) as raised:
        async with await open_journal(journal_target, create=create) as journal:
            await journal.sessions()
    text = str(raised.value)
    assert f"is damaged: its table {table} is missing" in text and "backup" in text


@pytest.mark.parametrize("target", ["/", "", ".", "sqlite:///", "x\0y.sqlite3", "sqlite:///x%00y"])
@pytest.mark.parametrize("create", [True, False])
async def test_a_path_no_journal_file_can_have_is_a_journal_error(
    target: str, create: bool
) -> None:
    # A root, "." or an empty string raised ValueError ("PosixPath('/') has an empty
    # name"), and a NUL byte "embedded null byte": `journal list --journal sqlite:///`
    # was an internal error (exit 4).
    with pytest.raises(JournalError, match="is not the path of a journal file"):
        await open_journal(target, create=create)


def test_a_workspace_path_holding_a_nul_byte_is_a_journal_error() -> None:
    with pytest.raises(JournalError, match="is not the path of a journal file"):
        SQLiteJournal.in_workspace("work\0space")


def test_the_cli_says_a_path_names_no_journal_file(tmp_path: Path) -> None:
    done = run_cli("list", "--journal", "sqlite:///", cwd=tmp_path)
    assert done.returncode == 3 and "is not the path of a journal file" in done.stderr


@pytest.mark.parametrize("create", [True, False])
def test_a_journal_path_that_is_a_pipe_says_so(tmp_path: Path, create: bool) -> None:
    # A pipe failed with "disk I/O error. Check the file and the disk it is on; move the
    # file aside" (a device such as /dev/null with "cannot rollback - no transaction is
    # active", after SQLite had made /dev/null-journal).
    pipe = tmp_path / "journal.sqlite3"
    os.mkfifo(pipe)
    with pytest.raises(JournalError) as raised:
        asyncio.run(open_journal(str(pipe), create=create))
    text = str(raised.value)
    assert f"{pipe} is not a plain file" in text and "move the file aside" not in text
    assert os.listdir(tmp_path) == ["journal.sqlite3"]  # nothing made beside it


def _read_as_nobody(path: Path, answer: Any) -> None:
    """In a forked child: become the unprivileged user `nobody`, read the journal at `path`
    as `journal show` does, and send back what became of it."""
    try:
        os.setgid(65534)
        os.setuid(65534)
        asyncio.run(open_journal(str(path), create=False))
    except Exception as exc:
        answer.send(f"{type(exc).__name__}: {exc}")
    else:
        answer.send("opened")


def test_a_journal_of_another_user_says_its_owners_file_is_not_readable() -> None:
    # Its -owners file is made for its owner only (0600): a reader of another user was told
    # "<folder> is read-only for this process ... Make it writable", which does not help.
    import multiprocessing
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("becoming another user needs root")
    with tempfile.TemporaryDirectory() as shared:  # (pytest's tmp_path is root's only)
        folder = Path(shared)
        os.chmod(folder, 0o755)
        path = folder / "journal.sqlite3"
        asyncio.run(make_journal(str(path)))
        os.chmod(path, 0o644)
        fork = multiprocessing.get_context("fork")
        answer, sent = fork.Pipe(duplex=False)
        child = fork.Process(target=_read_as_nobody, args=(path, sent))
        child.start()
        sent.close()
        text = answer.recv()
        child.join()
    assert f"JournalError: the journal {path} cannot open" in text, text
    assert f"{path}-owners is not readable by this process" in text, text
    assert "Make it writable" not in text
