"""Two options that did not do what they say: ``journal --journal sqlite:///abs/path``
opened ``abs/path`` (relative: the URL's leading ``/`` was dropped), and ``skills -v``
turned on no logging (every other command's ``-v`` does); a URL of another scheme was
taken for a file's path."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge.journal import CallKey, JournalError, SQLiteJournal, open_journal

REPO = Path(__file__).resolve().parents[2]


def toolbridge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path])}
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


async def journal_with_a_session(path: Path, session: str) -> None:
    async with SQLiteJournal(path) as journal:
        key = CallKey(session, "call-1", f"{1:064x}")
        await journal.claim(key, "write_file", {"path": "a.txt", "content": "x"})
        await journal.abandon(key)


def test_a_sqlite_url_with_an_absolute_path_opens_that_file(tmp_path: Path) -> None:
    stored = tmp_path / "kept" / "calls.sqlite3"
    stored.parent.mkdir()
    asyncio.run(journal_with_a_session(stored, "night-run"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for url in (f"sqlite://{stored}", f"sqlite://localhost{stored}"):
        done = toolbridge(elsewhere, "journal", "list", "--journal", url)
        assert done.returncode == 0, done.stderr
        assert "night-run" in done.stdout, done.stdout


def test_a_sqlite_url_naming_another_host_is_one_error(tmp_path: Path) -> None:
    done = toolbridge(tmp_path, "journal", "list", "--journal", "sqlite://db.example/x.db")
    assert done.returncode == 3, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: 'sqlite://db.example/x.db' is not a SQLite file URL"), line
    assert "sqlite:///absolute/path" in line


def test_a_url_of_another_scheme_is_an_error_not_a_file_path(tmp_path: Path) -> None:
    """``postgres:db`` (a PostgreSQL URL without ``//``), ``sqlite3:///x`` or ``file:///x``
    named a SQLite file of that name in the current folder (``open_journal`` created it):
    each is an error saying how to write the journal's target, and nothing is created."""
    for url in ("postgres:db", "postgresql:/db", "sqlite3:///x.db", "file:///x.db"):
        done = toolbridge(tmp_path, "journal", "list", "--journal", url)
        assert done.returncode == 3, done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"Error: {url!r} is not a journal toolbridge can open"), line
        assert "sqlite:///absolute/path" in line and "postgresql://" in line, line
    assert list(tmp_path.iterdir()) == []


async def test_open_journal_creates_no_file_named_like_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("postgresql:x", "postgres:x.db"):
        with pytest.raises(JournalError, match="postgresql://"):
            await open_journal(url)
    assert not any(os.scandir(tmp_path))


async def test_a_sqlite_url_scheme_is_read_in_any_case(tmp_path: Path) -> None:
    stored = tmp_path / "calls.sqlite3"
    await journal_with_a_session(stored, "night-run")
    async with await open_journal(f"SQLite://{stored}", create=False) as journal:
        assert [name for name, _ in await journal.sessions()] == ["night-run"]


def test_skills_verbose_logs_as_every_command_does(tmp_path: Path) -> None:
    skill = tmp_path / ".toolbridge" / "skills" / "broken"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    quiet = toolbridge(tmp_path, "skills", "list")
    loud = toolbridge(tmp_path, "skills", "list", "-v")
    assert quiet.returncode == loud.returncode, (quiet.stderr, loud.stderr)
    assert "DEBUG toolbridge." not in quiet.stderr
    assert "DEBUG toolbridge." in loud.stderr or "WARNING toolbridge." in loud.stderr, loud.stderr
