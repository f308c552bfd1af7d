"""Exec sessions against real processes, in the real bubblewrap sandbox and without it:
commands that keep running (yield_time_ms), write_stdin, list_exec_sessions, one sandbox
per context session, and every way a session ends leaving no process behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ErrorKind, ToolCallRequest, ToolContext, ToolLoader, ToolRegistry
from toolbridge.core.tool import ToolResult
from toolbridge.execution.exec_sessions import ExecSession
from toolbridge.execution.executor import ToolExecutor
from toolbridge.execution.process import Supervisor, run_command
from toolbridge.tools.shell import ExecConfig, ExecTool

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
MODES = ["bwrap", "none"]
LIMIT = 30.0  # only a real hang reaches it
WAIT = 60_000  # wait_timeout_ms for wait_for: as generous


def make_tool(workspace: Path, sandbox: str, **config: object) -> ExecTool:
    settings = {"sandbox": sandbox, "unsandboxed": "allow", **config}
    tool = ExecTool(workspace, ExecConfig.model_validate(settings), environ=BASE_ENV)
    assert tool.sandboxed == (sandbox == "bwrap")
    return tool


def registry(tool: ExecTool, session: str = "default") -> ToolRegistry:
    return ToolRegistry(
        [tool, *tool.companions()], context=ToolContext(tool.workspace, session=session)
    )


def marker() -> str:
    """A sleep length no other process on the machine uses: found in /proc by it."""
    return f"{300 + (os.getpid() * 7919 + time.monotonic_ns()) % 100000 / 1000000:.6f}"


def running(token: str) -> list[int]:
    """Pids (host view) of live processes whose command line holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def describe(pids: list[int]) -> str:
    """Each process left: pid, state, parent and command line (for a failure message)."""
    rows = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        rows.append(f"{pid} state {stat[0]} parent {stat[1]}: {cmdline[:200]}")
    return "left behind:\n" + "\n".join(rows)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def gone(token: str) -> bool:
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        if not running(token):
            return True
        await asyncio.sleep(0.05)
    return False


async def appears(token: str, count: int = 1) -> bool:
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        if len(running(token)) >= count:
            return True
        await asyncio.sleep(0.05)
    return False


async def call(tools: ToolRegistry, name: str, **args: Any) -> ToolResult:
    return await tools.execute(name, args)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- exec with yield_time_ms, write_stdin ---------------------------------------------------


async def test_an_interactive_shell_keeps_running_and_answers(workspace: Path, mode: str) -> None:
    tool = make_tool(workspace, mode)
    tools = registry(tool)
    started = await call(tools, "exec", command="sh", yield_time_ms=100)
    assert not started.is_error, started.text
    sid = started.metadata["session_id"]
    assert started.metadata["running"] is True and "exit_code" not in started.metadata
    assert f"still running: session_id {sid}" in started.text
    answer = await call(
        tools,
        "write_stdin",
        session_id=sid,
        chars="echo $((6*7))\n",
        wait_for="42",
        wait_timeout_ms=WAIT,
    )
    assert answer.text.splitlines()[0] == "42"
    assert answer.metadata == {**answer.metadata, "session_id": sid, "running": True}
    # Only what came since the last poll comes back.
    again = await call(
        tools,
        "write_stdin",
        session_id=sid,
        chars="echo next\n",
        wait_for="next",
        wait_timeout_ms=WAIT,
    )
    assert again.text.splitlines()[0] == "next"
    # Its scratch HOME lasts as long as it does (a plain call's goes with the call).
    home = await call(
        tools, "write_stdin", session_id=sid, chars='test -d "$HOME" && echo home-ok\n',
        wait_for="home-ok", wait_timeout_ms=WAIT,
    )  # fmt: skip
    assert home.text.splitlines()[0] == "home-ok"
    ended = await call(
        tools, "write_stdin", session_id=sid, chars="exit 3\n", close_stdin=True,
        yield_time_ms=30000,
    )  # fmt: skip
    assert ended.text.splitlines()[-1] == "Exit code: 3"
    assert ended.metadata["running"] is False and ended.metadata["exit_code"] == 3
    assert "session_id" not in ended.metadata
    after = await call(tools, "write_stdin", session_id=sid)
    assert after.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert f"no exec session {sid}" in after.text
    tool.close()


async def test_a_command_that_ends_in_time_returns_as_a_plain_exec(
    workspace: Path, mode: str
) -> None:
    tool = make_tool(workspace, mode)
    result = await call(registry(tool), "exec", command="echo done; exit 4", yield_time_ms=30000)
    assert result.text == "done\nExit code: 4"
    assert result.metadata["exit_code"] == 4 and result.metadata["running"] is False
    assert "session_id" not in result.metadata
    assert tool.sessions.listing("default") == []
    tool.close()


async def test_a_server_started_in_a_session_is_reached_by_the_next_exec(
    workspace: Path, mode: str
) -> None:
    tool = make_tool(workspace, mode)
    tools = registry(tool)
    (workspace / "page.txt").write_text("served from the workspace")
    server = await call(
        tools, "exec", command="python3 -u -m http.server 0 --bind 127.0.0.1", yield_time_ms=0
    )
    sid = server.metadata["session_id"]
    banner = await call(
        tools, "write_stdin", session_id=sid, wait_for="Serving HTTP", wait_timeout_ms=WAIT
    )
    port = re.search(r"port (\d+)", banner.text)
    assert port is not None, banner.text
    fetch = (
        'python3 -c "import urllib.request as u; '
        f"print(u.urlopen('http://127.0.0.1:{port[1]}/page.txt').read().decode())\""
    )
    fetched = await call(tools, "exec", command=fetch)
    assert fetched.text == "served from the workspace\nExit code: 0"
    log = await call(
        tools, "write_stdin", session_id=sid, wait_for="page.txt", wait_timeout_ms=WAIT
    )
    assert "GET /page.txt" in log.text
    stopped = await call(tools, "write_stdin", session_id=sid, terminate=True)
    assert stopped.metadata["running"] is False
    assert "killed by signal 9" in stopped.text
    tool.close()


async def test_list_exec_sessions_shows_the_callers_sessions(workspace: Path, mode: str) -> None:
    tool = make_tool(workspace, mode)
    tools = registry(tool)
    token = marker()
    assert (await call(tools, "list_exec_sessions")).text == "No exec sessions."
    first = await call(tools, "exec", command=f"sleep {token}", yield_time_ms=0)
    second = await call(tools, "exec", command="echo bye", yield_time_ms=0)
    await tool.sessions.get("default", second.metadata["session_id"]).wait(LIMIT)  # type: ignore[union-attr]
    listing = await call(tools, "list_exec_sessions")
    rows = {row["session_id"]: row for row in listing.metadata["sessions"]}
    assert rows[first.metadata["session_id"]]["running"] is True
    assert rows[first.metadata["session_id"]]["command"] == f"sleep {token}"
    assert rows[second.metadata["session_id"]] == {
        **rows[second.metadata["session_id"]],
        "running": False,
        "exit_code": 0,
    }
    assert f"session_id {first.metadata['session_id']}: sleep {token}" in listing.text
    assert "exit code 0" in listing.text
    tool.close()
    assert await gone(token)


# --- ownership and isolation ---------------------------------------------------------------


async def test_another_context_session_cannot_see_poll_or_kill(workspace: Path, mode: str) -> None:
    tool = make_tool(workspace, mode)
    mine, theirs = registry(tool, "alice"), registry(tool, "bob")
    token = marker()
    started = await call(mine, "exec", command=f"sleep {token}", yield_time_ms=0)
    sid = started.metadata["session_id"]
    assert (await call(theirs, "list_exec_sessions")).metadata["sessions"] == []
    for args in ({}, {"terminate": True}, {"chars": "x\n"}):
        refused = await call(theirs, "write_stdin", session_id=sid, **args)
        assert refused.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert await appears(token)
    assert (await call(mine, "write_stdin", session_id=sid, yield_time_ms=0)).metadata["running"]
    missed = await call(mine, "write_stdin", session_id=sid, wait_for="never", wait_timeout_ms=50)
    assert missed.text.startswith("Note: 'never' did not appear in the output within 50 ms.")
    assert missed.metadata["running"] and not missed.is_error
    tool.close()
    assert await gone(token)


async def test_two_context_sessions_never_share_a_sandbox(workspace: Path) -> None:
    tool = make_tool(workspace, "bwrap")
    alice, bob = registry(tool, "alice"), registry(tool, "bob")
    server = await call(
        alice, "exec", command="python3 -u -m http.server 8000 --bind 127.0.0.1", yield_time_ms=0
    )
    await call(
        alice,
        "write_stdin",
        session_id=server.metadata["session_id"],
        wait_for="Serving",
        wait_timeout_ms=WAIT,
    )
    probe = (
        'python3 -c "import urllib.request as u; '
        "print(u.urlopen('http://127.0.0.1:8000/').status)\" 2>/dev/null || echo unreachable; "
        "ls /proc | grep -c '^[0-9]'"
    )
    await call(alice, "exec", command="echo private > /tmp/mine")
    seen_by_alice = (await call(alice, "exec", command=probe)).text.splitlines()
    seen_by_bob = (await call(bob, "exec", command=probe)).text.splitlines()
    assert seen_by_alice[0] == "200"
    assert seen_by_bob[0] == "unreachable"
    # bob's sandbox: its own /proc (no server there), its own /tmp
    assert int(seen_by_bob[1]) < int(seen_by_alice[1])
    mine = await call(bob, "exec", command="cat /tmp/mine 2>/dev/null || echo not-here")
    assert mine.text.splitlines()[0] == "not-here"
    assert (await call(alice, "exec", command="cat /tmp/mine")).text.startswith("private")
    tool.close()


async def test_past_max_sessions_a_new_one_is_a_clear_error(workspace: Path, mode: str) -> None:
    tool = make_tool(workspace, mode, max_sessions=2)
    tools = registry(tool)
    token = marker()
    for _ in range(2):
        ok = await call(tools, "exec", command=f"sleep {token}", yield_time_ms=0)
        assert ok.metadata["running"]
    refused = await call(tools, "exec", command=f"sleep {token}", yield_time_ms=0)
    assert refused.is_error and refused.error_kind is ErrorKind.EXECUTION_ERROR
    assert "exec.max_sessions = 2" in refused.text and "terminate=true" in refused.text
    assert await appears(token, 2)
    assert [row.running for row in tool.sessions.listing("default")] == [True, True]
    # Another context session has its own cap, and a plain exec is never refused.
    assert (await call(registry(tool, "other"), "exec", command="true", yield_time_ms=0)).text
    assert (await call(tools, "exec", command="echo plain")).text == "plain\nExit code: 0"
    tool.close()
    assert await gone(token)


# --- how sessions end -----------------------------------------------------------------------


async def test_terminate_kills_the_whole_process_tree(workspace: Path, mode: str) -> None:
    tool = make_tool(workspace, mode)
    tools = registry(tool)
    token = marker()
    command = (
        f"setsid sleep {token} > /dev/null 2>&1 & (sleep {token} &) ; "
        f"sh -c 'sleep {token}' & echo started; wait"
    )
    started = await call(tools, "exec", command=command, yield_time_ms=0)
    assert await appears(token, 3)
    stopped = await call(tools, "write_stdin", session_id=started.metadata["session_id"],
                         terminate=True)  # fmt: skip
    assert "started" in stopped.text and stopped.metadata["running"] is False
    assert running(token) == []  # terminate returns once everything is dead
    tool.close()


async def test_the_idle_limit_ends_an_unpolled_session(workspace: Path, mode: str) -> None:
    tool = make_tool(workspace, mode, session_idle_s=0.5)
    tools = registry(tool)
    token = marker()
    started = await call(tools, "exec", command=f"sleep {token}", yield_time_ms=0)
    session = tool.sessions.get("default", started.metadata["session_id"])
    assert isinstance(session, ExecSession)
    await session.wait(LIMIT)  # sleep 300 ends within that only if it is ended
    assert not session.running and session.exit_code == -signal.SIGKILL
    assert await gone(token)
    late = await call(tools, "write_stdin", session_id=started.metadata["session_id"])
    assert late.error_kind is ErrorKind.INVALID_ARGUMENTS
    tool.close()


async def test_executor_aclose_ends_the_sessions_its_calls_started(
    workspace: Path, mode: str
) -> None:
    tool = make_tool(workspace, mode)
    tools = registry(tool)
    ours, other = marker(), marker()
    bystander = ToolExecutor(tools)
    await bystander.run([ToolCallRequest("b", "exec", {"command": f"sleep {other}",
                                                       "yield_time_ms": 0})])  # fmt: skip
    async with ToolExecutor(tools) as executor:
        [outcome] = await executor.run(
            [ToolCallRequest("a", "exec", {"command": f"sleep {ours}", "yield_time_ms": 0})]
        )
        assert outcome.result.metadata["running"]
        assert await appears(ours)
    assert running(ours) == []  # ended before aclose returned
    server = tool.supervisor.pid
    assert server is not None
    async with ToolExecutor(tools) as plain:
        [done] = await plain.run([ToolCallRequest("p", "exec", {"command": "echo plain"})])
        assert done.result.text == "plain\nExit code: 0"
    # the sandbox stays: the bystander's session still runs in it
    assert tool.supervisor.pid == server
    assert await appears(other)  # another executor's session is not this one's to end
    await bystander.aclose()
    assert running(other) == []
    assert not alive(server)  # nothing uses the context session's sandbox now: it ended
    tool.close()


async def test_a_chatty_process_never_blocks_and_its_buffer_stays_bounded(
    workspace: Path, mode: str
) -> None:
    tool = make_tool(workspace, mode)
    tools = registry(tool)
    started = await call(
        tools, "exec", command="yes | head -c 50000000; echo finished", yield_time_ms=0
    )
    session = tool.sessions.get("default", started.metadata["session_id"])
    assert isinstance(session, ExecSession)
    await session.wait(LIMIT * 4)  # it only ends if its output was read all along
    assert not session.running
    assert session.buffered_bytes <= tool.config.max_output_bytes + 65_536
    result = await call(tools, "write_stdin", session_id=session.id, max_output_chars=1000)
    assert result.text.splitlines()[-1] == "Exit code: 0"
    assert "finished" in result.text and "output truncated" in result.text
    assert result.metadata["omitted_bytes"] > 49_000_000
    assert len(result.text) < 1300
    tool.close()


async def test_control_sequences_are_stripped_from_session_output(workspace: Path) -> None:
    tool = make_tool(workspace, "none")
    tools = registry(tool)
    started = await call(
        tools, "exec", command=r"printf '\033[31mred\033[0m\n'; sleep 30", yield_time_ms=0
    )
    polled = await call(
        tools,
        "write_stdin",
        session_id=started.metadata["session_id"],
        wait_for="red",
        wait_timeout_ms=WAIT,
    )
    assert polled.text.splitlines()[0] == "red"
    tool.close()


HOST = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    from toolbridge import ToolContext, ToolRegistry
    from toolbridge.tools.shell import ExecConfig, ExecTool

    async def main():
        workspace, sandbox, token = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
        config = ExecConfig(sandbox=sandbox, unsandboxed="allow")
        tool = ExecTool(workspace, config, environ={"PATH": os.environ["PATH"]})
        tools = ToolRegistry([tool], context=ToolContext(workspace))
        await tools.execute("exec", {"command": f"sleep {token}", "yield_time_ms": 0})
        await tools.execute("exec", {"command": f"setsid sleep {token} & sleep {token}",
                                     "yield_time_ms": 0})
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def test_nothing_is_left_when_the_host_is_killed(workspace: Path, mode: str) -> None:
    token = marker()
    host = subprocess.Popen(  # noqa: ASYNC220 - a host to kill; read from a thread below
        [sys.executable, "-c", HOST, str(workspace), mode, token],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(host.stdout.readline), LIMIT)
        assert line == "ready\n"
        assert await appears(token, 3)
        host.send_signal(signal.SIGKILL)
        host.wait()
        assert await gone(token), describe(running(token))
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def test_the_loader_builds_the_companion_tools_with_exec(workspace: Path) -> None:
    names = [t.name for t in ToolLoader().load(ToolContext(workspace=workspace))]
    assert {"exec", "write_stdin", "list_exec_sessions"} <= set(names)
    off = ToolContext(workspace=workspace, config={"exec": {"enabled": False}})
    assert not {"exec", "write_stdin"} & {t.name for t in ToolLoader().load(off)}
    assert ExecConfig().session_idle_s == 1800 and ExecConfig().max_sessions == 8


async def test_an_agent_run_ends_the_sessions_its_calls_started(workspace: Path) -> None:
    from toolbridge.agent import AgentRunner, AssistantMessage, ModelRequest, ScriptedModel

    tool = make_tool(workspace, "bwrap")
    token = marker()
    start = ToolCallRequest("c1", "exec", {"command": f"sleep {token}", "yield_time_ms": 0})
    seen: list[int] = []

    def second_turn(request: ModelRequest) -> AssistantMessage:
        deadline = time.monotonic() + LIMIT  # the turn is sync: wait for the process here
        while not (found := running(token)) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.extend(found)
        return AssistantMessage(text="done")

    model = ScriptedModel([AssistantMessage(calls=(start,)), second_turn])
    result = await AgentRunner(model, registry(tool)).run("start a server")
    assert result.conversation[-1].text == "done"  # type: ignore[union-attr]
    assert seen  # it ran during the run,
    assert running(token) == []  # and the run's end ended it
    assert tool.sessions.listing("default") == []
    tool.close()


def test_write_stdin_needs_approval_wherever_exec_does(workspace: Path) -> None:
    approve = ExecTool(workspace, ExecConfig(sandbox="none"), environ=BASE_ENV)
    assert approve.requires_approval
    write, listing = approve.companions()
    assert write.requires_approval and not listing.requires_approval and listing.read_only
    sandboxed = make_tool(workspace, "bwrap")
    assert not sandboxed.companions()[0].requires_approval


def test_a_cli_call_leaves_no_session_behind(workspace: Path, mode: str) -> None:
    token = marker()
    arguments = json.dumps({"command": f"sleep {token}", "yield_time_ms": 0})
    config = workspace.parent / "toolbridge.toml"
    config.write_text(f'[tools.exec]\nsandbox = "{mode}"\n')
    done = subprocess.run(
        [sys.executable, "-m", "toolbridge", "call", "exec", arguments,
         "--allow-unsandboxed-exec", "--config", str(config)],
        cwd=workspace, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "still running: session_id 1" in done.stdout
    assert running(token) == []  # ended with the command, before it returned


async def test_a_scratch_home_that_exists_already_fails_the_call(
    workspace: Path, tmp_path: Path
) -> None:
    planted = tmp_path / "planted-home"
    planted.symlink_to(workspace)  # what another user could leave at a HOME path in /tmp
    supervisor = Supervisor()
    try:
        result = await run_command(
            ["/bin/sh", "-c", "echo ran"], cwd=workspace, env=BASE_ENV, time_limit=LIMIT,
            output_limit=10_000, kill_after_bytes=1_000_000, supervisor=supervisor,
            home=str(planted),
        )  # fmt: skip
    finally:
        supervisor.close()
    assert result.exit_code == 126
    assert "cannot make the scratch HOME" in result.output and "ran" not in result.output
    assert planted.is_symlink()  # left as it was


async def test_a_call_whose_caller_is_gone_before_it_starts_leaves_nothing(
    workspace: Path,
) -> None:
    # The host died while its request waited in the server: the call supervisor finds the
    # channel closed when it says its pid, and must stop the command, not die and orphan it.
    token = marker()
    supervisor = Supervisor()
    try:
        for _ in range(5):
            read, write = os.pipe()
            channel = supervisor.launch(
                ["/bin/sh", "-c", f"sleep {token}"], cwd=workspace, env=BASE_ENV, output_fd=write
            )
            channel.close()  # before the call supervisor could say anything
            os.close(write)
            os.close(read)
    finally:
        supervisor.close()  # the server goes too, as when the host is killed
    assert await gone(token), describe(running(token))
