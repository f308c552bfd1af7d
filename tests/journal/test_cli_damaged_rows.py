"""``toolbridge journal`` on a journal whose rows were damaged or written by another
program: every command ends with one ``Error:`` line that names the record, never a
Python traceback (found by the independent journal checks)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.journal.test_cli import run_cli

from toolbridge.journal import CallKey, JournalError, SQLiteJournal
from toolbridge.journal.records import refused_key

DAMAGES = {
    "approval that is no object": "UPDATE toolbridge_calls SET approval = '\"yes\"'",
    "tool stored as bytes": "UPDATE toolbridge_calls SET tool = x'1b5b324a'",
    "call id stored as bytes": "UPDATE toolbridge_calls SET call_id = x'1b5b324a'",
    "error kind stored as bytes": "UPDATE toolbridge_calls SET error_kind = x'1b5b324a'",
    "time past any calendar": "UPDATE toolbridge_calls SET created_at = 1e300, finished_at = 1e300",
    "time that is not a number": "UPDATE toolbridge_calls SET finished_at = 'yesterday'",
    "time that is not finite": "UPDATE toolbridge_calls SET created_at = 'nan', started_at = 'inf'",
    "session stored as bytes": "UPDATE toolbridge_calls SET session = x'73'",
    # what an older toolbridge stored for a tool's NaN: export must still be strict JSON
    "outcome with a bare NaN": "UPDATE toolbridge_calls SET outcome = '{\"v\": [NaN, -Infinity]}'",
    "arguments nested past the recursion limit": (
        "UPDATE toolbridge_calls SET arguments = printf('%.*c', 100000, '[')"
    ),
}


def not_json(name: str) -> None:
    raise AssertionError(f"{name} is no JSON value")


async def one_call(path: Path) -> None:
    async with SQLiteJournal(path) as journal:
        key = CallKey("s", "c", "h")
        await journal.claim(key, "read_file", {"path": "notes.md"})
        await journal.finish(key, {"content": "ok", "is_error": False}, error_kind=None)


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("command", [("list",), ("show", "s"), ("export",)])
def test_a_damaged_row_is_one_error_line(
    tmp_path: Path, damage: str, command: tuple[str, ...]
) -> None:
    path = tmp_path / "journal.sqlite3"
    asyncio.run(one_call(path))
    with sqlite3.connect(path) as conn:
        conn.execute(DAMAGES[damage])
    conn.close()

    done = run_cli(*command, "--journal", str(path), cwd=tmp_path)

    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 0:  # shown as it is, inert, and strict JSON where it is JSON
        assert "\x1b" not in done.stdout and done.stderr == "", done
        if command == ("export",):
            for line in done.stdout.splitlines():
                json.loads(line, parse_constant=not_json)
        return
    assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
    if done.returncode == 2:  # the bytes are no session name the command was given
        assert "no calls in session" in done.stderr, done.stderr
    else:  # a damaged record is refused, saying so and what to do
        assert done.returncode == 3, (done.returncode, done.stderr)
        assert "damaged" in done.stderr and "move" in done.stderr, done.stderr


def test_a_session_name_that_is_not_utf8_holds_no_calls(tmp_path: Path) -> None:
    """A session given on the command line as bytes that are not UTF-8 (a lone surrogate
    to Python) cannot be in any journal: it is an error about the name, not the journal."""
    path = tmp_path / "journal.sqlite3"
    asyncio.run(one_call(path))
    name = os.fsdecode(b"s\xff")
    for command in (["show", name], ["export", "--session", name]):
        done = subprocess.run(
            [sys.executable, "-m", "toolbridge", "journal", *command, "--journal", str(path)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, (command, done.stderr)
        assert "is not UTF-8 text" in done.stderr, done.stderr
        assert "UnicodeEncodeError" not in done.stderr, done.stderr


def column(table: str, index: int) -> str:
    """The text of column `index` of a table printed by rich, its lines joined."""
    cells = [line.split("│")[index].strip() for line in table.splitlines() if "│" in line]
    return "".join(cells)


def test_show_in_a_pipe_cuts_no_value_short(tmp_path: Path) -> None:
    """An audit printed to a file or a pipe (80 columns) shows every value whole: the
    table folds a long one onto more lines instead of cutting it with '…', so two
    refusals of one call (asked, then denied) do not read alike."""
    path = tmp_path / "journal.sqlite3"

    async def refusals() -> None:
        async with SQLiteJournal(path) as journal:
            for kind in ("approval_required", "approval_denied"):
                key = refused_key("s", "call_" + "x" * 60)
                outcome = {"content": "Error: no", "is_error": True}
                await journal.refuse(key, "write_file", {}, outcome, error_kind=kind)

    asyncio.run(refusals())
    done = run_cli("show", "s", "--journal", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout, done.stdout
    assert column(done.stdout, 5) == "approval_requiredapproval_denied", done.stdout
    assert column(done.stdout, 1) == 2 * ("call_" + "x" * 60), done.stdout


@pytest.mark.parametrize("table", ["toolbridge_calls", "toolbridge_runs"])
def test_a_journal_missing_one_of_its_tables_is_damaged(tmp_path: Path, table: str) -> None:
    """A journal whose schema version row is there but one of its tables is not (dropped
    by hand, a partial restore) is refused as damaged when it opens, by every command and
    by a run, not read as 'failed to record calls' by a command that records nothing."""
    path = tmp_path / "journal.sqlite3"
    asyncio.run(one_call(path))
    with sqlite3.connect(path) as conn:
        conn.execute(f"DROP TABLE {table}")
    conn.close()
    for command in (("list",), ("show", "s"), ("export",)):
        done = run_cli(*command, "--journal", str(path), cwd=tmp_path)
        assert done.returncode == 3, (command, done)
        assert done.stderr == (
            f"Error: the journal {path} is damaged: its table {table} is missing. Restore "
            "it from a backup, or move it aside to start a new one (calls it recorded can "
            "then run again).\n"
        ), done.stderr
    with pytest.raises(JournalError, match=f"is damaged: its table {table} is missing"):
        asyncio.run(one_call(path))
