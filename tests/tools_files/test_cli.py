"""The default command line over the current directory, as `make run` drives it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _toolbridge(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge.cli", *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_reads_a_range_in_the_current_directory(workspace: Path) -> None:
    (workspace / "README.md").write_text("# title\nline two\nline three\n")
    done = _toolbridge(workspace, "call", "read_file", '{"path": "README.md", "limit": "2"}')
    assert done.returncode == 0, done.stderr
    first, second, footer = done.stdout.splitlines()
    # rich expands the tab after each line number into spaces
    assert (first.split(), second.split()) == (["1", "#", "title"], ["2", "line", "two"])
    assert footer == "… lines 1-2 shown; README.md continues: read on with offset=3"
    assert "cast '2' -> 2" in done.stderr


def test_cli_refuses_to_read_outside(workspace: Path) -> None:
    done = _toolbridge(workspace, "call", "read_file", '{"path": "../../etc/passwd"}')
    assert done.returncode == 1
    assert done.stdout.startswith("Error: '../../etc/passwd' is outside the workspace")
    assert "root:" not in done.stdout


def test_cli_lists_the_file_tools(workspace: Path) -> None:
    done = _toolbridge(workspace, "tools", "--json")
    assert done.returncode == 0, done.stderr
    for name in ("read_file", "write_file", "edit_file", "list_dir", "glob", "grep"):
        assert f'"name": "{name}"' in done.stdout
