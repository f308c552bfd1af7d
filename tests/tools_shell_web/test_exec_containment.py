"""exec without a sandbox: the supervisor, the scratch HOME, cwd, clean output, and the
policy for unsandboxed commands (approve, allow, refuse). Real processes throughout."""

from __future__ import annotations

import asyncio
import gc
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolbridge import (
    ErrorKind,
    OutcomeStatus,
    ToolCallRequest,
    ToolConfigError,
    ToolContext,
    ToolExecutor,
    ToolLoader,
    ToolRegistry,
)
from toolbridge.security.sandbox import SandboxUnavailable
from toolbridge.tools.shell import ExecConfig, ExecTool

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
SUPERVISED = {"sandbox": "none", "unsandboxed": "allow"}


def registry(
    workspace: Path, environ: dict[str, str] | None = None, **config: object
) -> ToolRegistry:
    settings = {**SUPERVISED, **config}
    tool = ExecTool(workspace, ExecConfig.model_validate(settings), environ=environ or BASE_ENV)
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def dies(pid: int) -> bool:
    for _ in range(6000):  # at least 60 s: only a real hang reaches it on a loaded machine
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


def exists(path: Path) -> bool:
    return path.exists()


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


# --- the supervisor -------------------------------------------------------------------


async def test_a_setsid_descendant_is_killed_when_the_call_ends(workspace: Path) -> None:
    command = (
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' > /dev/null 2>&1 & "
        "while [ ! -s escaped.pid ]; do :; done; echo done"
    )
    result = await registry(workspace).execute("exec", {"command": command})
    assert result.text == "done\nExit code: 0"
    assert await dies(pids(workspace / "escaped.pid")[0])


async def test_a_double_forked_daemon_is_killed_when_the_call_ends(workspace: Path) -> None:
    # The classic daemon: fork, setsid, fork again, the middle process exits, the
    # grandchild is orphaned (re-parented to the supervisor, not to toolbridge or init).
    daemon = textwrap.dedent(
        """
        import os, sys, time
        if os.fork():
            os.wait(); sys.exit(0)
        os.setsid()
        if os.fork():
            os._exit(0)
        with open("daemon.pid", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
        """
    )
    (workspace / "daemon.py").write_text(daemon)
    command = (
        f"{sys.executable} daemon.py < /dev/null > /dev/null 2>&1; "
        "while [ ! -s daemon.pid ]; do :; done; cat daemon.pid"
    )
    result = await registry(workspace).execute("exec", {"command": command})
    pid = int(result.text.splitlines()[0])
    assert pid == pids(workspace / "daemon.pid")[0]
    assert await dies(pid)


HOST_SCRIPT = """
import asyncio, os, sys
from pathlib import Path
from toolbridge import ToolRegistry
from toolbridge.tools.shell import ExecConfig, ExecTool

async def main() -> None:
    tool = ExecTool(Path(sys.argv[1]), ExecConfig(sandbox="none", unsandboxed="allow"))
    result = await ToolRegistry([tool]).execute("exec", {"command": sys.argv[2]})
    print(repr(result.text))
    print("host survived", os.getpid())

asyncio.run(main())
"""


@pytest.mark.parametrize(
    "command",
    ["kill $PPID", "kill -9 $PPID", "kill 0", "kill -9 0", "kill -TERM -$PPID"],
)
def test_the_command_cannot_signal_the_host(workspace: Path, command: str) -> None:
    """The host runs in its own process, so a command that hits it cannot take pytest down."""
    done = subprocess.run(
        [sys.executable, "-c", HOST_SCRIPT, str(workspace), f"{command}; sleep 1; echo after"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"host survived {done.stdout.split()[-1]}" in done.stdout


async def test_the_command_is_not_a_child_of_the_host(workspace: Path) -> None:
    result = await registry(workspace).execute("exec", {"command": "echo $PPID"})
    supervisor = int(result.text.splitlines()[0])
    assert supervisor != os.getpid()


# --- HOME, environment, output --------------------------------------------------------


async def test_home_is_a_fresh_scratch_directory_removed_after_the_call(workspace: Path) -> None:
    environ = {**BASE_ENV, "HOME": str(Path.home()), "XDG_CONFIG_HOME": "/home/me/.config"}
    tools = registry(workspace, environ)
    command = (
        'echo "$HOME"; ls -A "$HOME" | wc -l; touch "$HOME/note"; echo "${XDG_CONFIG_HOME:-unset}"'
    )
    first = (await tools.execute("exec", {"command": command})).text.splitlines()
    second = (await tools.execute("exec", {"command": command})).text.splitlines()
    home = Path(first[0])
    assert home != Path.home() and first[0] != second[0]
    assert first[1:3] == ["0", "unset"] and second[1:3] == ["0", "unset"]
    assert not exists(home)


async def test_terminal_control_sequences_never_reach_the_model(workspace: Path) -> None:
    command = (
        r"printf 'a\033[31mred\033[0m\n';"
        r"printf 'clip\033]52;c;cm0gLXJmIH4=\007board\n';"
        r"printf 'title\033]0;pwned\033\\ok\n';"
        r"printf 'bell\007 back\010space\rcr\n'"
    )
    result = await registry(workspace).execute("exec", {"command": command})
    assert result.text == "ared\nclipboard\ntitleok\nbell backspace\ncr\nExit code: 0"


async def test_control_sequences_are_stripped_on_both_sides_of_a_cut(workspace: Path) -> None:
    # An OSC 52 write cut in two by the output cap must not survive on either side.
    command = r"printf '\033]52;c;'; head -c 5000 /dev/zero | tr '\0' A; printf '\007\033[2Jend\n'"
    result = await registry(workspace, max_output_bytes=1000).execute("exec", {"command": command})
    assert "\x1b" not in result.text and "\x07" not in result.text
    assert "[... output truncated:" in result.text
    assert result.text.endswith("end\nExit code: 0")


# --- cwd ------------------------------------------------------------------------------


async def test_cwd_inside_the_workspace(workspace: Path) -> None:
    (workspace / "sub" / "deeper").mkdir(parents=True)
    result = await registry(workspace).execute("exec", {"command": "pwd", "cwd": "sub/deeper"})
    assert result.text == f"{workspace / 'sub' / 'deeper'}\nExit code: 0"


@pytest.mark.parametrize("cwd", ["..", "/", "/etc", "sub/../../..", "link"])
async def test_cwd_outside_the_workspace_is_a_workspace_violation(
    workspace: Path, cwd: str
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "link").symlink_to(workspace.parent)
    result = await registry(workspace).execute("exec", {"command": "touch ran", "cwd": cwd})
    assert result.is_error and result.error_kind is ErrorKind.WORKSPACE_VIOLATION
    assert "outside the workspace" in result.text
    assert not exists(workspace.parent / "ran") and not exists(Path("/ran"))


async def test_cwd_that_is_no_directory_says_so(workspace: Path) -> None:
    (workspace / "file.txt").write_text("x")
    tools = registry(workspace)
    missing = await tools.execute("exec", {"command": "true", "cwd": "nope"})
    assert missing.is_error and "'nope' does not exist" in missing.text
    a_file = await tools.execute("exec", {"command": "true", "cwd": "file.txt"})
    assert a_file.is_error and "'file.txt' is not a directory" in a_file.text


# --- without a sandbox: approve, allow, refuse ----------------------------------------


async def test_unsandboxed_exec_needs_approval_by_default(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="none"), environ=BASE_ENV)
    assert tool.requires_approval and not tool.sandboxed
    executor = ToolExecutor(ToolRegistry([tool], context=ToolContext(workspace=workspace)))
    call = ToolCallRequest("c1", "exec", {"command": "touch ran"})
    [pending] = await executor.run([call])
    assert pending.status is OutcomeStatus.PENDING_APPROVAL
    assert not (workspace / "ran").exists()
    executor.approve(pending)
    [done] = await executor.run([call])
    assert done.ok and (workspace / "ran").exists()


async def test_refuse_makes_every_call_a_policy_error_that_says_how_to_opt_in(
    workspace: Path,
) -> None:
    tools = registry(workspace, unsandboxed="refuse")
    result = await tools.execute("exec", {"command": "touch ran"})
    assert result.is_error and result.error_kind is ErrorKind.POLICY_VIOLATION
    assert "unsandboxed = 'allow'" in result.text and "--allow-unsandboxed-exec" in result.text
    assert not (workspace / "ran").exists()


def test_allow_runs_without_approval(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig(sandbox="none", unsandboxed="allow"))
    assert not tool.requires_approval


def fake_bwrap(directory: Path, script: str) -> Path:
    """A `bwrap` on PATH that behaves like a broken install (user namespaces forbidden)."""
    directory.mkdir()
    path = directory / "bwrap"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return directory


def test_auto_without_bubblewrap_runs_unsandboxed_and_asks_for_approval(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    tool = ExecTool(workspace, ExecConfig(sandbox="auto"))
    assert not tool.sandboxed and tool.requires_approval
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        ExecTool(workspace, ExecConfig(sandbox="bwrap"))


def test_a_bubblewrap_that_cannot_run_is_not_used(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = "bwrap: No permissions to create new namespace"
    bin_dir = fake_bwrap(tmp_path / "bin", f"echo '{message}' >&2; exit 1")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    auto = ExecTool(workspace, ExecConfig(sandbox="auto"))
    assert not auto.sandboxed and auto.requires_approval
    with pytest.raises(ToolConfigError, match="bubblewrap cannot run here: " + message):
        ExecTool(workspace, ExecConfig(sandbox="bwrap"))


def test_the_loader_passes_the_new_settings(workspace: Path) -> None:
    ctx = ToolContext(
        workspace=workspace, config={"exec": {"sandbox": "none", "unsandboxed": "refuse"}}
    )
    [tool] = [t for t in ToolLoader().load(ctx) if t.name == "exec"]
    assert isinstance(tool, ExecTool)
    assert tool.config.unsandboxed == "refuse" and not tool.requires_approval
    bad = ToolContext(workspace=workspace, config={"exec": {"unsandboxed": "maybe"}})
    with pytest.raises(ToolConfigError, match="unsandboxed"):
        ToolLoader().load(bad)


# --- the supervisor server ------------------------------------------------------------


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


async def test_one_server_per_tool_forks_a_supervisor_per_call(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig.model_validate(SUPERVISED), environ=BASE_ENV)
    tools = ToolRegistry([tool], context=ToolContext(workspace=workspace))
    assert tool.supervisor.pid is None  # started on first use
    command = "echo $PPID; cut -d' ' -f4 /proc/$PPID/stat"  # call supervisor, its parent
    first = (await tools.execute("exec", {"command": command})).text.splitlines()
    second = (await tools.execute("exec", {"command": command})).text.splitlines()
    server = tool.supervisor.pid
    assert server is not None and server != os.getpid()
    assert first[1] == second[1] == str(server)
    assert first[0] != second[0]  # a fresh call supervisor each time
    assert parent_of(server) == os.getpid()
    tool.supervisor.close()
    assert await dies(server)


async def test_a_killed_server_is_replaced_on_the_next_call(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig.model_validate(SUPERVISED), environ=BASE_ENV)
    tools = ToolRegistry([tool], context=ToolContext(workspace=workspace))
    await tools.execute("exec", {"command": "true"})
    server = tool.supervisor.pid
    assert server is not None
    result = await tools.execute("exec", {"command": f"kill -9 {server}; echo sent"})
    assert result.text.startswith("sent")
    assert await dies(server)
    again = await tools.execute("exec", {"command": "echo again"})
    assert again.text == "again\nExit code: 0"
    assert tool.supervisor.pid not in (None, server)
    tool.supervisor.close()


async def test_descendants_of_a_killed_call_supervisor_are_killed_by_the_server(
    workspace: Path,
) -> None:
    command = (
        "setsid sh -c 'echo $$ > orphan.pid; exec sleep 300' > /dev/null 2>&1 & "
        "while [ ! -s orphan.pid ]; do :; done; kill -9 $PPID; sleep 300"
    )
    result = await registry(workspace).execute("exec", {"command": command, "timeout": 60})
    assert result.metadata["exit_code"] == -9  # the call ended when its supervisor died
    assert await dies(pids(workspace / "orphan.pid")[0])


async def test_the_server_ends_when_its_tool_is_collected(workspace: Path) -> None:
    tool = ExecTool(workspace, ExecConfig.model_validate(SUPERVISED), environ=BASE_ENV)
    await ToolRegistry([tool]).execute("exec", {"command": "true"})
    server = tool.supervisor.pid
    assert server is not None and alive(server)
    del tool
    gc.collect()
    assert not alive(server)  # closed and reaped by the finalizer, not left to init


async def test_a_shell_that_cannot_start_is_reported_not_hidden(workspace: Path) -> None:
    tools = registry(workspace, shell="/nonexistent/sh")
    result = await tools.execute("exec", {"command": "true"})
    assert result.text.startswith("exec: cannot run '/nonexistent/sh'")
    assert "No such file or directory" in result.text
    assert result.metadata["exit_code"] == 127
