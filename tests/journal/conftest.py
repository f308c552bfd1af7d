"""A real PostgreSQL server for the journal tests: a throwaway cluster, started once.

The Debian server binaries are on the machine (``pg_config --bindir``); the cluster runs
as an unprivileged system user (PostgreSQL refuses to run as root) in a temporary
directory, on a Unix socket only, and is stopped at the end of the session.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from toolbridge.journal.postgres import PostgresJournal

PG_USER = "toolbridge-pg"
_databases = itertools.count()


def _bindir() -> Path:
    found = shutil.which("pg_config")
    if found:
        done = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(done.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise AssertionError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install postgresql "
        "(.ci/run does) to run the journal's PostgreSQL tests"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_user() -> dict[str, object]:
    """Run the server as an unprivileged user when we are root (created if missing)."""
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        # Two test workers (pytest-xdist) or two runs may create the user at the same moment:
        # the loser's useradd fails with "already exists", and the user is there all the same.
        done = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            raise AssertionError(f"cannot create the user {PG_USER}: {done.stderr}") from None
    entry = pwd.getpwnam(PG_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


@contextmanager
def throwaway_cluster(*, tcp: bool = False) -> Iterator[str]:
    """Start a cluster; yield its base connection string; stop and delete it (also used by
    bench/journal_bench.py). `tcp`: it listens on 127.0.0.1 too, and the string names it."""
    bindir = _bindir()
    identity = _as_user()
    base = Path(tempfile.mkdtemp(prefix="toolbridge-pg-"))
    data, sockets = base / "data", base / "sockets"
    sockets.mkdir()
    if identity:
        for path in (base, sockets):
            os.chown(path, int(identity["user"]), int(identity["group"]))  # type: ignore[call-overload]
    port = _free_port()
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "TZ": "UTC"}

    def run(*argv: object, check: bool = True) -> None:
        subprocess.run(  # type: ignore[call-overload]
            [str(arg) for arg in argv], env=env, capture_output=True, text=True, check=check,
            **identity,
        )  # fmt: skip

    run(bindir / "initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8", "-D", data, "--no-sync")
    listen = "127.0.0.1" if tcp else ""
    options = f"-k {sockets} -c listen_addresses={listen} -p {port} -c fsync=off"
    run(bindir / "pg_ctl", "-D", data, "-o", options, "-l", base / "log", "-w", "start")
    try:
        yield f"host={'127.0.0.1' if tcp else sockets} port={port} user=postgres"
    finally:
        run(bindir / "pg_ctl", "-D", data, "-m", "immediate", "stop", check=False)
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """`path` (a file or a folder) made immutable for the block (``chattr +i``): no
    process may change it, root included, as permissions cannot refuse root."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, f"chattr +i needs root and ext4 or the like: {done.stderr}"
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.fixture
def postgres_over_tcp() -> Iterator[str]:
    """A cluster of its own that listens on 127.0.0.1: its connection string over TCP."""
    with throwaway_cluster(tcp=True) as conninfo:
        yield conninfo


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The base connection string of a running throwaway cluster."""
    with throwaway_cluster() as conninfo:
        yield conninfo


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the throwaway cluster, as a postgresql:// URL."""
    import psycopg

    name = f"journal_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(f"{postgres_server} dbname=postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = dict(part.split("=", 1) for part in postgres_server.split())
    return f"postgresql://{parts['user']}@/{name}?host={parts['host']}&port={parts['port']}"


@pytest.fixture
async def pg_journal(postgres_url: str) -> AsyncIterator[PostgresJournal]:
    """A journal on the real PostgreSQL server, open for the test."""
    from toolbridge.journal import open_journal
    from toolbridge.journal.postgres import PostgresJournal

    opened = await open_journal(postgres_url)
    assert isinstance(opened, PostgresJournal)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
def journal_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a journal lives: a SQLite file, or a database on the real PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.sqlite3")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 200 KiB file system (tmpfs): the journal fills it up for real."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"mounting a small tmpfs needs root: {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
