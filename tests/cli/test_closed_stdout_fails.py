"""A closed stdout (``toolbridge tools >&-``) is an error, as a full disk is: the output
was lost, so the command must not say it succeeded (exit 0 before). One ``Error:`` line
on stderr, exit 2, before the command runs (so a call's tool never runs unseen)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("toolbridge")


def closed_stdout(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(1),
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--help",),
        ("tools",),
        ("tools", "--json"),
        ("skills", "list", "--json"),
        ("call", "read_file", '{"path": "a.txt"}'),
    ],
)
def test_a_closed_stdout_is_one_error_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    done = closed_stdout(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line == "Error: cannot write the output: stdout is closed", line


def test_a_call_is_not_run_when_its_result_could_not_be_shown(tmp_path: Path) -> None:
    done = closed_stdout(tmp_path, "call", "write_file", '{"path": "b.txt", "content": "x"}')
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "b.txt").exists()
