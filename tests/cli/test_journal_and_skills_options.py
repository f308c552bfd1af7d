"""Two options that did not do what they say: ``journal --journal sqlite:///abs/path``
opened ``abs/path`` (relative: the URL's leading ``/`` was dropped), and ``skills -v``
turned on no logging (every other command's ``-v`` does)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from toolbridge.journal import CallKey, SQLiteJournal

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


def test_skills_verbose_logs_as_every_command_does(tmp_path: Path) -> None:
    skill = tmp_path / ".toolbridge" / "skills" / "broken"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    quiet = toolbridge(tmp_path, "skills", "list")
    loud = toolbridge(tmp_path, "skills", "list", "-v")
    assert quiet.returncode == loud.returncode, (quiet.stderr, loud.stderr)
    assert "DEBUG toolbridge." not in quiet.stderr
    assert "DEBUG toolbridge." in loud.stderr or "WARNING toolbridge." in loud.stderr, loud.stderr
