"""``journal list|show|export`` read a journal in a folder this process may not write
(docs/guide/journal.md), not only on a read-only disk: a folder made immutable
(``chattr +i``, which refuses writes to root too) holds a journal no process has open."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.journal.conftest import immutable
from tests.journal.test_cli import run_cli

from toolbridge.journal import CallKey, SQLiteJournal


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a closed journal, then made immutable."""
    folder = tmp_path / "audit"
    folder.mkdir()

    async def write() -> None:
        async with SQLiteJournal(folder / "journal.sqlite3") as journal:
            key = CallKey("s", "c", "h")
            await journal.claim(key, "read_file", {"path": "notes.md"})
            await journal.finish(key, {"content": "ok", "is_error": False})

    asyncio.run(write())
    with immutable(folder):
        yield folder


def test_the_read_commands_read_a_journal_in_a_folder_they_cannot_write(
    unwritable: Path,
) -> None:
    before = sorted(path.name for path in unwritable.iterdir())
    journal = str(unwritable / "journal.sqlite3")

    listed = run_cli("list", "--journal", journal, cwd=unwritable.parent)
    assert listed.returncode == 0, listed.stderr
    shown = run_cli("show", "s", "--journal", journal, cwd=unwritable.parent)
    assert shown.returncode == 0, shown.stderr
    assert "read_file" in shown.stdout and "finished" in shown.stdout
    exported = run_cli("export", "--journal", journal, cwd=unwritable.parent)
    assert exported.returncode == 0, exported.stderr
    assert [json.loads(line)["call_id"] for line in exported.stdout.splitlines()] == ["c"]
    assert sorted(path.name for path in unwritable.iterdir()) == before  # nothing made
