"""The command line behaves at its edges: Ctrl-C at start-up and in ``mcp serve`` on
stdio ends it with exit 130 (no traceback), a busy port is one line, and a closed stdout
(``| head``) ends every command quietly."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.cli.conftest import Cli, assert_one_line_error

from toolbridge.journal import CallKey, SQLiteJournal

WAIT = 30.0  # seconds before a process that never reacts counts as hung (a hang guard)
REPO = Path(__file__).resolve().parents[2]


def command(*args: str, python: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, *python, "-m", "toolbridge", *args]


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path])}


def default_ctrl_c() -> None:
    """In the child: Ctrl-C as at a terminal. A test run in the background inherits it
    ignored, and Python keeps ignoring it then (exit 0, as a shell's `cmd &` asks)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class OnTerminal:
    """A command with a pseudo-terminal as its stdin, stdout and stderr."""

    def __init__(self, argv: list[str], workspace: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, with the terminal as its stdio
            os.chdir(workspace)
            default_ctrl_c()
            os.execve(argv[0], argv, environment())
        self.shown = b""

    def _read(self, timeout: float) -> None:
        if select.select([self.fd], [], [], timeout)[0]:
            try:
                self.shown += os.read(self.fd, 4096)
            except OSError:  # the terminal closed: the process is ending
                time.sleep(0.05)

    def read_until(self, marker: bytes) -> None:
        end = time.monotonic() + WAIT
        while marker not in self.shown and time.monotonic() < end:
            self._read(0.5)
        assert marker in self.shown, self.shown.decode(errors="replace")

    def interrupt(self) -> int | None:
        """One Ctrl-C; the exit code, or None when the command did not end (killed)."""
        os.kill(self.pid, signal.SIGINT)
        end = time.monotonic() + WAIT
        try:
            while time.monotonic() < end:
                done, status = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    return os.waitstatus_to_exitcode(status)
                self._read(0.2)
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            return None
        finally:
            os.close(self.fd)


def ended(process: subprocess.Popen[bytes]) -> int | None:
    """The exit code, or None (killed) when the process does not end within `WAIT`."""
    try:
        return process.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def test_mcp_serve_on_a_terminal_says_how_to_stop_and_ctrl_c_stops_it(workspace: Path) -> None:
    terminal = OnTerminal(command("mcp", "serve"), workspace)
    terminal.read_until(b"Ctrl-C or closing stdin stops it")
    assert b"serving MCP on stdio" in terminal.shown
    code = terminal.interrupt()  # once: it was lost before (two, then a SIGKILL)
    assert code == 130, terminal.shown.decode(errors="replace")
    assert b"Traceback" not in terminal.shown


def test_mcp_serve_on_stdio_ends_at_ctrl_c_while_serving_a_client(workspace: Path) -> None:
    process = subprocess.Popen(
        command("mcp", "serve"),
        cwd=workspace,
        env=environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_ctrl_c,  # noqa: PLW1509  (no threads here)
    )
    assert process.stdin is not None and process.stdout is not None
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    process.stdin.write(json.dumps(initialize).encode() + b"\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())  # it serves: it is reading stdin now
    assert answer["id"] == 1 and "serverInfo" in answer["result"]
    process.send_signal(signal.SIGINT)  # stdin stays open: only Ctrl-C can end it
    code = ended(process)
    assert process.stderr is not None
    stderr = process.stderr.read().decode()
    process.stdin.close()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert "serving MCP on stdio" not in stderr  # stderr is not a terminal: nothing said


def test_mcp_serve_http_on_a_busy_port_is_one_line(cli: Cli) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = cli("mcp", "serve", "--http", f"127.0.0.1:{port}")
    assert_one_line_error(done, 2, f"cannot serve on 127.0.0.1:{port}", "--http")


async def fill_journal(workspace: Path, calls: int) -> None:
    async with SQLiteJournal.in_workspace(workspace) as journal:
        for number in range(calls):
            key = CallKey("s", f"call-{number}", f"{number:064x}")
            await journal.claim(key, "write_file", {"path": "a.txt", "content": "x" * 1000})
            await journal.abandon(key)


def test_journal_export_into_head_ends_quietly(workspace: Path) -> None:
    # `journal export | head -c 10`: head reads 10 bytes and leaves; the export has more
    # than a pipe holds, so it writes into a closed pipe.
    asyncio.run(fill_journal(workspace, 300))
    process = subprocess.Popen(
        command("journal", "export"),
        cwd=workspace,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert len(process.stdout.read(10)) == 10
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert ended(process) == 141, stderr  # 128 + SIGPIPE, as a shell reports `cat`
    assert stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("--help",),
        ("tools",),
        ("tools", "--json"),
        ("call", "list_dir", "{}"),
        ("journal", "export"),
        ("journal", "list"),
        ("skills", "list"),
        ("mcp", "--help"),
    ],
)
def test_every_command_ends_quietly_when_stdout_is_closed(
    workspace: Path, args: tuple[str, ...]
) -> None:
    asyncio.run(fill_journal(workspace, 1))
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write fails
    try:
        done = subprocess.run(
            command(*args),
            cwd=workspace,
            env=environment(),
            stdout=writer,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr.decode()) == (141, "")


def test_ctrl_c_at_calls_approval_question_exits_130(workspace: Path) -> None:
    config = workspace / "toolbridge.toml"
    config.write_text('[executor]\napproval = "writes"\n')
    arguments = '{"path": "b.txt", "content": "beta"}'
    argv = command("call", "write_file", arguments, "--config", str(config))
    terminal = OnTerminal(argv, workspace)
    terminal.read_until(b"Run it? [y/N]: ")
    code = terminal.interrupt()  # once, the moment the question shows
    assert code == 130, terminal.shown.decode(errors="replace")
    assert b"Traceback" not in terminal.shown and b"Aborted" not in terminal.shown
    assert not (workspace / "b.txt").exists()
