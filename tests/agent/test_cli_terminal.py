"""``toolbridge agent`` at a real terminal (a pseudo-terminal): Ctrl-C while it waits for
the user (the ``>`` prompt of an interactive session, an approval question) ends the
command with exit code 130 at once, and a paused session resumes afterwards.

Ctrl-C is sent only once the command is provably waiting for the user: every thread of it
asleep in the kernel (``/proc/<pid>/task/*/stat``). Seeing the prompt is not enough, as the
prompt is written just before the blocking read starts; a signal sent in between tests the
scheduler, not the command."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

from tests.agent.scripted_server import ScriptedServer, openai_chat_stream
from tests.agent.test_cli import REPO

WAIT = 30.0  # seconds before a process that never exits counts as hung (a hang guard)


def _thread_states(pid: int) -> list[str]:
    """The scheduler state of each thread of ``pid`` ('R' running, 'S' asleep, ...)."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # a thread that ended while we looked
            continue
        states.append(stat.rsplit(")", 1)[1].split()[0])  # the field after "(comm)"
    return states


def wait_until_blocked(pid: int) -> None:
    """Return once every thread of ``pid`` sleeps in the kernel, seen twice in a row: the
    command has entered the wait for input it showed a prompt for (a thread between the
    prompt and its read is running or runnable, never asleep)."""
    end = time.monotonic() + WAIT
    asleep_before = False
    while time.monotonic() < end:
        states = _thread_states(pid)
        asleep = bool(states) and all(state == "S" for state in states)
        if asleep and asleep_before:
            return
        asleep_before = asleep
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never waited for input: {_thread_states(pid)}")


class Terminal:
    """The command running on a pseudo-terminal: read what it shows, send signals."""

    def __init__(self, server_url: str, workspace: Path, *args: str) -> None:
        env = {**os.environ, "OPENAI_API_KEY": "test-key", "HOME": str(workspace.parent)}
        env.update(USER="tester", LOGNAME="tester")
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *sys.path])
        command = [sys.executable, "-m", "toolbridge", "agent", *args]
        command += ["--model", "openai:gpt-test", "--base-url", f"{server_url}/v1"]
        command += ["--workspace", str(workspace), "--no-skills"]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, with the terminal as its stdio
            os.execve(command[0], command, env)
        self.shown = b""

    def read_until(self, marker: bytes) -> None:
        end = time.monotonic() + WAIT
        while marker not in self.shown and time.monotonic() < end:
            if select.select([self.fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.shown += chunk
        assert marker in self.shown, self.shown.decode(errors="replace")

    def interrupt(self) -> int | None:
        """Ctrl-C once the command waits for the user; the exit code, or None when the
        command did not exit (it is killed)."""
        wait_until_blocked(self.pid)
        os.kill(self.pid, signal.SIGINT)
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return None


def test_ctrl_c_at_the_interactive_prompt_exits_130(
    server: ScriptedServer, workspace: Path
) -> None:
    terminal = Terminal(server.url, workspace)
    terminal.read_until(b"> ")
    assert terminal.interrupt() == 130
    assert not server.requests


def test_ctrl_c_at_an_approval_question_exits_130_and_the_session_resumes(
    server: ScriptedServer, workspace: Path
) -> None:
    write = [("c1", "write_file", '{"path": "b.txt", "content": "beta"}')]
    server.add(openai_chat_stream(calls=write))
    terminal = Terminal(server.url, workspace, "Write b.txt", "--session", "s")
    terminal.read_until(b"[y/N]")
    assert terminal.interrupt() == 130
    assert not (workspace / "b.txt").exists()

    from tests.agent.test_cli import agent

    server.add(openai_chat_stream(text="Written."))
    resumed = agent(server.url, workspace, "go on", "--session", "s", tty_input="y\n")
    assert resumed.returncode == 0, resumed.stderr
    assert "Allow write_file" in resumed.stderr
    assert (workspace / "b.txt").read_text() == "beta"
    assert len(server.requests) == 2  # the paused turn was not asked for again


def test_a_session_in_use_by_another_command_is_refused(
    server: ScriptedServer, workspace: Path
) -> None:
    # Two commands going on from one stored run would each save their own turns over the
    # other's: the second is refused while the first holds the session.
    from tests.agent.test_cli import agent

    write = [("c1", "write_file", '{"path": "b.txt", "content": "beta"}')]
    server.add(openai_chat_stream(calls=write))
    first = Terminal(server.url, workspace, "Write b.txt", "--session", "s")
    first.read_until(b"[y/N]")
    second = agent(server.url, workspace, "something else", "--session", "s", "--yes")
    server.add(openai_chat_stream(text="Hi."))
    other = agent(server.url, workspace, "hi", "--session", "t")
    assert first.interrupt() == 130
    assert second.returncode == 2, second.stderr
    [line] = second.stderr.strip().splitlines()
    assert "session 's' is in use" in line
    assert not (workspace / "b.txt").exists()  # the first's paused call was not run
    assert other.returncode == 0, other.stderr  # another session is free meanwhile
    assert other.stdout.strip() == "Hi."

    server.add(openai_chat_stream(text="Written."))
    resumed = agent(server.url, workspace, "go on", "--session", "s", tty_input="y\n")
    assert resumed.returncode == 0, resumed.stderr  # free again once the first ended
    assert (workspace / "b.txt").read_text() == "beta"
