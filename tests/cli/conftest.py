"""The command line as a user runs it: a real subprocess, real files, real plugins.

Plugins are installed the way pip leaves them: a ``*.dist-info`` directory with an
``entry_points.txt`` on ``sys.path`` (here through PYTHONPATH), next to their module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import toolbridge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOURCE = Path(toolbridge.__file__).resolve().parents[1]
"""Where this test process imported toolbridge from: the commands it starts run that same
code (a worktree's sources, not the copy installed in the environment)."""


def python_path(site: Path) -> str:
    """``PYTHONPATH`` for a command the tests start: the plugins in `site`, then `SOURCE`."""
    return os.pathsep.join([str(site), str(SOURCE)])


class Cli:
    """Runs ``python -m toolbridge`` in a workspace, with the plugins written so far."""

    def __init__(self, workspace: Path, site: Path) -> None:
        self.workspace = workspace
        self.site = site

    def plugin(self, name: str, code: str, entry_points: dict[str, str]) -> None:
        """Install module `name` with `code`, naming `entry_points` (name -> object)."""
        (self.site / f"{name}.py").write_text(textwrap.dedent(code))
        dist = self.site / f"{name}-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
        (dist / "entry_points.txt").write_text(f"[toolbridge.tools]\n{lines}")

    def __call__(
        self,
        *args: str,
        stdin: str | bytes | None = None,
        cwd: Path | None = None,
        tty_input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the command; `tty_input` gives it a terminal as stdin and types that text."""
        env = {**os.environ, "PYTHONPATH": python_path(self.site)}
        command = [sys.executable, "-m", "toolbridge", *args]
        if tty_input is not None:
            return run_on_tty(command, cwd or self.workspace, env, tty_input)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        done = subprocess.run(
            command,
            cwd=cwd or self.workspace,
            input=data,
            capture_output=True,
            timeout=60,
            check=False,
            env=env,
        )
        return subprocess.CompletedProcess(
            done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
        )


def run_on_tty(
    command: list[str], cwd: Path, env: dict[str, str], typed: str
) -> subprocess.CompletedProcess[str]:
    master, slave = os.openpty()
    try:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        os.close(slave)
        if typed:
            os.write(master, typed.encode())
        stdout, stderr = process.communicate(timeout=60)
    finally:
        os.close(master)
    return subprocess.CompletedProcess(
        command, process.returncode, stdout.decode(), stderr.decode()
    )


@pytest.fixture
def cli(workspace: Path, tmp_path: Path) -> Cli:
    site = tmp_path / "site"
    site.mkdir()
    return Cli(workspace, site)


@pytest.fixture
def cli_in_process(workspace: Path, tmp_path: Path) -> Cli:
    """`cli`, run inside this process (tests/cli/in_process.py says when that is the same)."""
    from tests.cli.in_process import InProcessCli

    site = tmp_path / "site"
    site.mkdir()
    return InProcessCli(workspace, site)


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    """Exit `code`, nothing on stdout, one ``Error:`` line on stderr naming `parts`."""
    assert done.returncode == code, (done.returncode, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
