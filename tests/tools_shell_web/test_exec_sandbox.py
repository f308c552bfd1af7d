"""exec inside the real bubblewrap sandbox (installed by .ci/run): what the command can see,
write and reach. Every test runs commands in the sandbox; none checks only the argv."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolLoader, ToolRegistry
from toolbridge.security.sandbox import HIDDEN_PATHS, SANDBOX_HOME, BubblewrapSandbox
from toolbridge.tools.shell import ExecConfig, ExecTool

# The supervisor inside the sandbox runs on this Python: its prefix is shown read-only
# when it lies under a hidden path (a pyenv under /root here), and nothing else there is.
INTERPRETER = Path(os.path.realpath(sys.base_prefix))
BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def sandboxed(workspace: Path, **config: object) -> ToolRegistry:
    tool = ExecTool(
        workspace, ExecConfig.model_validate({"sandbox": "bwrap", **config}), environ=BASE_ENV
    )
    assert tool.sandboxed
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


def exists(path: Path) -> bool:
    return path.exists()


def read(path: Path) -> str:
    return path.read_text()


async def run(tools: ToolRegistry, command: str, **args: object) -> list[str]:
    result = await tools.execute("exec", {"command": command, **args})
    assert not result.is_error, result.text
    return result.text.splitlines()


def test_auto_is_the_default_and_picks_bubblewrap_when_it_works(workspace: Path) -> None:
    assert ExecConfig().sandbox == "auto" and ExecConfig().unsandboxed == "approve"
    ctx = ToolContext(workspace=workspace)
    [tool] = [t for t in ToolLoader().load(ctx) if t.name == "exec"]
    assert isinstance(tool, ExecTool) and tool.sandboxed
    assert not tool.requires_approval  # sandboxed commands need no approval by default
    assert "sandbox without network" in tool.description


async def test_only_the_workspace_is_writable(workspace: Path) -> None:
    command = (
        "echo inside > made.txt && echo ws-ok; "
        "for d in /etc /usr /var /opt /; do "
        "touch $d/toolbridge-probe 2>/dev/null && echo $d-rw; done; "
        "echo end"
    )
    assert await run(sandboxed(workspace), command) == ["ws-ok", "end", "Exit code: 0"]
    assert (workspace / "made.txt").read_text() == "inside\n"
    assert not exists(Path("/etc/toolbridge-probe"))


async def test_homes_run_and_tmp_are_hidden_and_private(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "outside-secret"
    secret.write_text("secret")
    tools = sandboxed(workspace)
    lines = await run(
        tools,
        f"cat {secret} 2>/dev/null || echo no-secret; "
        "for d in /home /root /run; do echo $d:$(ls -A $d | wc -l); done; "
        "echo private > /tmp/left; echo $HOME; ls -A $HOME | wc -l",
    )
    home = lines.pop(4)
    shown = [f"{d}:{int(INTERPRETER.is_relative_to(d))}" for d in ("/home", "/root")]
    assert lines == ["no-secret", *shown, "/run:0", "0", "Exit code: 0"]
    assert home.startswith(f"{SANDBOX_HOME}/")
    assert not exists(Path("/tmp/left"))
    # /tmp is the context session's (its commands share it), HOME is each call's own.
    again = await run(tools, f"cat /tmp/left; test -e {home} || echo home-gone")
    assert again == ["private", "home-gone", "Exit code: 0"]
    other = ToolRegistry([tools.get("exec")], context=ToolContext(workspace, session="other"))
    elsewhere = await run(other, "cat /tmp/left 2>/dev/null || echo gone")
    assert elsewhere == ["gone", "Exit code: 0"]
    assert set(HIDDEN_PATHS) >= {"/home", "/root", "/run", "/tmp"}


async def test_read_paths_show_a_hidden_path_read_only(workspace: Path, tmp_path: Path) -> None:
    tools_dir = tmp_path / "toolchain"
    tools_dir.mkdir()
    (tools_dir / "version").write_text("1.2.3")
    tools = sandboxed(workspace, sandbox_read_paths=[str(tools_dir)])
    lines = await run(
        tools, f"cat {tools_dir}/version; echo; touch {tools_dir}/x 2>/dev/null || echo read-only"
    )
    assert lines == ["1.2.3", "read-only", "Exit code: 0"]


async def test_the_host_proc_and_processes_are_not_visible(workspace: Path) -> None:
    lines = await run(
        sandboxed(workspace),
        f"test -e /proc/{os.getpid()}/cmdline && echo host-visible; "
        "ls /proc | grep -c '^[0-9]'; echo ppid=$PPID",
    )
    assert "host-visible" not in lines
    assert int(lines[0]) <= 5  # the sandbox's init (the server), call supervisor, sh, ls, grep
    assert lines[1] != f"ppid={os.getpid()}"


async def test_no_network_unless_configured(workspace: Path) -> None:
    interfaces = "grep -c : /proc/net/dev"
    host = len([line for line in read(Path("/proc/net/dev")).splitlines() if ":" in line])
    assert await run(sandboxed(workspace), interfaces) == ["1", "Exit code: 0"]  # loopback
    networked = sandboxed(workspace, sandbox_network=True)
    assert await run(networked, interfaces) == [str(host), "Exit code: 0"]
    assert "sandbox with network" in networked.get("exec").description


async def test_every_descendant_dies_with_the_call(workspace: Path) -> None:
    token = f"{300 + os.getpid() % 1000 / 10000:.4f}"
    lines = await run(
        sandboxed(workspace),
        f"setsid sleep {token} > /dev/null 2>&1 & (sleep {token} &) ; echo started",
    )
    assert lines == ["started", "Exit code: 0"]
    for _ in range(6000):  # >= 60 s; the PID namespace is torn down once its first process exits
        if not _running(token):
            break
        await asyncio.sleep(0.01)
    assert _running(token) == []


def _running(token: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] if cmdline else ""
        except OSError:
            continue
        if token.encode() in cmdline and state not in ("Z", "X"):
            found.append(entry.name)
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` runs: neither gone nor a zombie (killed, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_kill_from_inside_reaches_nothing_outside(workspace: Path) -> None:
    """``kill -9 -1`` inside reaches no process outside, and the sandbox runs the next
    command. (Whether the shell prints before the call, its supervisor killed, is ended
    from outside is a race: on a busy machine it is ended first.)"""
    outside = await asyncio.create_subprocess_exec("sleep", "60")  # same user, outside
    try:
        tools = sandboxed(workspace)
        await tools.execute("exec", {"command": "kill -9 $PPID; kill -9 -1; echo still-here"})
        assert alive(outside.pid)
        assert await run(tools, "echo the-sandbox-lives") == ["the-sandbox-lives", "Exit code: 0"]
        assert alive(outside.pid)
    finally:
        outside.kill()
        await outside.wait()


async def test_cwd_works_in_the_sandbox_and_stays_guarded(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    tools = sandboxed(workspace)
    assert await run(tools, "pwd", cwd="sub") == [str(workspace / "sub"), "Exit code: 0"]
    outside = await tools.execute("exec", {"command": "pwd", "cwd": "/etc"})
    assert outside.error_kind is ErrorKind.WORKSPACE_VIOLATION


def test_the_argv_puts_the_workspace_over_the_hidden_paths(tmp_path: Path) -> None:
    argv = BubblewrapSandbox("/usr/bin/bwrap").argv(
        ["/bin/sh", "-c", "ls"], workspace=tmp_path, cwd=tmp_path
    )
    text = " ".join(argv)
    assert argv[:4] == ["/usr/bin/bwrap", "--die-with-parent", "--new-session", "--unshare-all"]
    assert "--share-net" not in argv and "--cap-drop ALL" in text
    assert (
        text.index("--ro-bind / /") < text.index("--tmpfs /tmp") < text.index(f"--bind {tmp_path}")
    )
    assert argv[-4:] == ["--", "/bin/sh", "-c", "ls"]


@pytest.mark.parametrize("network", [False, True])
def test_probe_passes_on_this_machine(workspace: Path, network: bool) -> None:
    assert BubblewrapSandbox("/usr/bin/bwrap", network=network).probe("/bin/sh", workspace) is None
