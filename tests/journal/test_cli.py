"""``toolbridge journal`` over a real journal file, run as a real subprocess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolbridge.journal import CallKey, SQLiteJournal


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge", "journal", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def fill(path: Path) -> None:
    async with SQLiteJournal(path) as journal:
        for session, calls in (("alpha", 2), ("beta", 1)):
            for index in range(calls):
                key = CallKey(session, f"call-{index}", "h")
                await journal.claim(key, "read_file", {"path": f"f{index}"})
                await journal.finish(key, {"text": "ok"}, error_kind=None)
        await journal.claim(CallKey("beta", "stuck", "h"), "exec", {"command": "sleep 9"})


def test_list_show_export_and_prune(tmp_path: Path) -> None:
    path = tmp_path / ".toolbridge" / "journal.sqlite3"
    path.parent.mkdir()
    asyncio.run(fill(path))

    listed = run_cli("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "alpha" in listed.stdout and "beta" in listed.stdout

    shown = run_cli("show", "beta", cwd=tmp_path)
    assert shown.returncode == 0
    # Its journal closed without finishing it: its owner's lock is gone, so it is shown
    # interrupted (not "running", as it was until the next run opened the journal).
    assert "stuck" in shown.stdout and "interrupted" in shown.stdout
    assert "running" not in shown.stdout

    exported = run_cli("export", "--session", "alpha", cwd=tmp_path)
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(r["session"], r["call_id"], r["state"]) for r in rows] == [
        ("alpha", "call-0", "finished"),
        ("alpha", "call-1", "finished"),
    ]
    assert rows[0]["arguments"] == {"path": "f0"} and rows[0]["outcome"] == {"text": "ok"}

    pruned = run_cli("prune", "--older-than-days", "0", cwd=tmp_path)
    assert (pruned.returncode, pruned.stdout.strip()) == (0, "deleted 3 finished call(s)")
    after = run_cli("export", cwd=tmp_path)
    assert [json.loads(line)["call_id"] for line in after.stdout.splitlines()] == ["stuck"]


def test_errors_are_one_line(tmp_path: Path) -> None:
    missing = run_cli("list", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"Error: no journal at {tmp_path}/.toolbridge/journal.sqlite3: the file does not exist "
        "(nothing was created). Check the path, or the workspace (--workspace) it is read from."
    )
    empty = run_cli("list", "--journal", "", cwd=tmp_path)  # read as '.' (a folder) before
    assert (empty.returncode, empty.stderr.strip()) == (
        2,
        "Error: --journal is empty: give a journal's file, or a postgresql:// URL",
    )
    corrupt = tmp_path / "bad.sqlite3"
    corrupt.write_bytes(b"garbage" * 1000)
    done = run_cli("list", "--journal", str(corrupt), cwd=tmp_path)
    assert done.returncode == 3
    assert done.stderr.startswith(f"Error: the journal {corrupt} is corrupt")
    assert "Traceback" not in done.stderr


def test_names_with_square_brackets_are_shown_as_they_are(tmp_path: Path) -> None:
    # Session names, call ids and tool names are data: rich read "[/b]" as markup and the
    # command died with a traceback (or styled "[bold]x" and hid the brackets).
    path = tmp_path / ".toolbridge" / "journal.sqlite3"
    path.parent.mkdir()

    async def odd() -> None:
        async with SQLiteJournal(path) as journal:
            for session in ("a[/b]", "[bold red]x"):
                key = CallKey(session, "[/call]", "h")
                await journal.claim(key, "[/tool]", {})
                await journal.finish(key, {"text": "ok"})

    asyncio.run(odd())
    listed = run_cli("list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "a[/b]" in listed.stdout and "[bold red]x" in listed.stdout
    shown = run_cli("show", "[bold red]x", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "[/call]" in shown.stdout and "[/tool]" in shown.stdout


def test_prune_refuses_negative_amounts_and_deletes_nothing(tmp_path: Path) -> None:
    # "--keep-sessions -1" deleted the oldest session and "--older-than-days -1" every
    # finished call, whatever its age: a typo that erased the audit trail.
    path = tmp_path / ".toolbridge" / "journal.sqlite3"
    path.parent.mkdir()
    asyncio.run(fill(path))
    for option in ("--keep-sessions", "--older-than-days"):
        done = run_cli("prune", option, "-1", cwd=tmp_path)
        assert done.returncode == 2, done.stdout
        assert f"Invalid value for '{option}'" in done.stderr
        assert "greater than or equal to 0" in done.stderr
    exported = run_cli("export", cwd=tmp_path)
    assert len(exported.stdout.splitlines()) == 4


async def test_the_library_refuses_negative_prune_amounts_too(tmp_path: Path) -> None:
    async with SQLiteJournal(tmp_path / "j.sqlite3") as journal:
        with pytest.raises(ValueError, match="keep_sessions must be 0 or more, not -1"):
            await journal.prune(keep_sessions=-1)
        with pytest.raises(ValueError, match="older_than must be 0 or more seconds, not -5"):
            await journal.prune(older_than=-5)


def test_export_is_strict_json_even_for_outcomes_with_nan(tmp_path: Path) -> None:
    # A data tool's NaN was stored as the bare word NaN, which no JSON parser but Python's
    # reads: `toolbridge journal export | jq` failed on the audit's first such line.
    path = tmp_path / ".toolbridge" / "journal.sqlite3"
    path.parent.mkdir()

    async def nan() -> None:
        async with SQLiteJournal(path) as journal:
            key = CallKey("s", "c", "h")
            await journal.claim(key, "stats", {})
            await journal.finish(key, {"value": [float("nan"), float("inf")]})

    asyncio.run(nan())
    exported = run_cli("export", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr

    def refuse(word: str) -> None:
        raise ValueError(f"{word} is not JSON")

    [row] = [json.loads(line, parse_constant=refuse) for line in exported.stdout.splitlines()]
    assert row["outcome"] == {"value": ["NaN", "Infinity"]}


def _peak_kib(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``toolbridge journal ARGS`` and measure its peak resident memory (KiB)."""
    code = (
        "import atexit, resource, runpy, sys\n"
        "atexit.register(lambda: print('peak', resource.getrusage(resource.RUSAGE_SELF)"
        ".ru_maxrss, file=sys.stderr))\n"
        f"sys.argv = ['toolbridge', 'journal', *{list(args)!r}]\n"
        "runpy.run_module('toolbridge', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, int(done.stderr.split("peak")[-1])


def test_show_holds_a_page_of_a_long_session_not_the_session(tmp_path: Path) -> None:
    # 400 calls of 250 KB outcomes: 100 MB stored. `show` used to read the whole session
    # (its texts, then their JSON: twice that); it reads a page of 100 at a time and keeps
    # only what a row shows.
    async def fill_large() -> None:
        async with SQLiteJournal(path) as journal:
            big = "x" * 250_000
            for index in range(400):
                key = CallKey("large", f"call-{index:03}", "h")
                await journal.claim(key, "read_file", {"path": f"f{index}"})
                await journal.finish(key, {"text": big}, error_kind=None)
            key = CallKey("small", "only", "h")
            await journal.claim(key, "read_file", {"path": "f"})
            await journal.finish(key, {"text": "ok"}, error_kind=None)

    path = tmp_path / ".toolbridge" / "journal.sqlite3"
    path.parent.mkdir()
    asyncio.run(fill_large())
    small, small_peak = _peak_kib("show", "small", cwd=tmp_path)
    large, large_peak = _peak_kib("show", "large", cwd=tmp_path)
    assert small.returncode == 0 and large.returncode == 0, large.stderr
    listed = [line.split()[1] for line in large.stdout.splitlines() if "call-" in line]
    assert listed == [f"call-{index:03}" for index in range(400)]  # every page, in order
    assert large_peak - small_peak < 80_000, (small_peak, large_peak)  # KiB: not 200 MB
