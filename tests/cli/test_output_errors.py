"""Output that cannot be written (``> /dev/full``: a full disk) is one ``Error:`` line
and exit 2, never a traceback or 'internal error' (which asks for a bug report); a
closed stdout (``>&-``) prints no traceback either."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("toolbridge")
FULL = Path("/dev/full")  # Linux: every write fails with ENOSPC


@pytest.mark.parametrize(
    "args", [("--version",), ("--help",), ("tools",), ("tools", "--json"), ("skills", "list")]
)
def test_a_full_disk_for_the_output_is_one_error_line(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    with FULL.open("w") as full:
        done = subprocess.run(
            [str(SCRIPT), *args],
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: cannot write the output") and "No space left" in line, line


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("tools",)])
def test_a_closed_stdout_prints_no_traceback(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = subprocess.run(
        [str(SCRIPT), *args],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert done.returncode in (0, 2), done.stderr
