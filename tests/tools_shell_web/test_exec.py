"""exec: real subprocesses in a real workspace; process groups counted, never timed."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbridge import ErrorKind, ToolConfigError, ToolContext, ToolLoader, ToolRegistry
from toolbridge.process import OutputCapture, scrub_environment
from toolbridge.tools.shell import ExecConfig, ExecTool, bwrap_argv

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def registry(
    workspace: Path, environ: dict[str, str] | None = None, **config: object
) -> ToolRegistry:
    tool = ExecTool(workspace, ExecConfig.model_validate(config), environ=environ or BASE_ENV)
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


async def dies(pid: int) -> bool:
    """Whether `pid` is gone within a generous bound (a kill is delivered asynchronously)."""
    for _ in range(1000):
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return False


def file_exists(path: Path) -> bool:
    return path.exists()


def read_pid(path: Path) -> int | None:
    text = path.read_text().strip() if file_exists(path) else ""
    return int(text) if text else None


async def started_pid(path: Path) -> int:
    """The pid the command writes to `path`, once it has written it."""
    for _ in range(1000):
        pid = read_pid(path)
        if pid is not None:
            return pid
        await asyncio.sleep(0.01)
    raise AssertionError(f"the command never wrote {path}")


async def test_output_exit_code_and_workspace_cwd(workspace: Path) -> None:
    result = await registry(workspace).execute("exec", {"command": "pwd; echo err >&2; exit 3"})
    assert not result.is_error
    assert result.text == f"{workspace}\nerr\nExit code: 3"
    assert result.metadata["exit_code"] == 3


async def test_stdin_is_closed(workspace: Path) -> None:
    result = await registry(workspace).execute("exec", {"command": "cat; read line; echo $?"})
    assert result.text == "1\nExit code: 0"


async def test_a_background_job_neither_keeps_the_call_waiting_nor_survives(
    workspace: Path,
) -> None:
    command = "sleep 300 & echo $! > bg.pid; echo started"
    result = await registry(workspace).execute("exec", {"command": command})
    assert result.text == "started\nExit code: 0"
    assert await dies(int((workspace / "bg.pid").read_text()))


async def test_timeout_kills_the_whole_group(workspace: Path) -> None:
    command = "sleep 300 & echo $! > bg.pid; echo before; sleep 300"
    result = await registry(workspace).execute("exec", {"command": command, "timeout": 0.5})
    assert result.is_error and result.error_kind is ErrorKind.TIMEOUT
    assert result.text.startswith("Error: the command timed out after 0.5 s")
    assert "before" in result.text
    assert result.metadata["timed_out"] is True
    assert await dies(int((workspace / "bg.pid").read_text()))


async def test_cancelling_the_call_kills_the_group_and_propagates(workspace: Path) -> None:
    command = "sleep 300 & echo $! > bg.pid; sleep 300"
    task = asyncio.create_task(registry(workspace).execute("exec", {"command": command}))
    pid = await started_pid(workspace / "bg.pid")
    assert alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await dies(pid)


async def test_a_100_mb_flood_is_cut_and_the_command_killed(workspace: Path) -> None:
    command = "head -c 100000000 /dev/zero | tr '\\0' a; echo never"
    result = await registry(workspace).execute("exec", {"command": command})
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "printed more than 10000000 bytes and was killed" in result.text
    assert result.metadata["output_bytes"] < 20_000_000
    assert len(result.text) < 25_000
    assert "never" not in result.text


async def test_long_output_keeps_head_and_tail(workspace: Path) -> None:
    command = "seq 1 100000"
    result = await registry(workspace, max_output_bytes=2000).execute("exec", {"command": command})
    lines = result.text.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-2:] == ["100000", "Exit code: 0"]
    omitted = result.metadata["omitted_bytes"]
    assert f"[... {omitted} bytes of output omitted ...]" in result.text
    assert omitted == len("\n".join(map(str, range(1, 100001))) + "\n") - 2000


async def test_the_timeout_is_capped_by_configuration(workspace: Path) -> None:
    tools = registry(workspace, default_timeout=1, max_timeout=2)
    result = await tools.execute("exec", {"command": "echo ok", "timeout": 1000})
    assert result.text == "ok\n[timeout capped at the configured maximum of 2 s]\nExit code: 0"


async def test_the_environment_is_scrubbed_unless_allowed(workspace: Path) -> None:
    environ = {
        **BASE_ENV,
        "OPENAI_API_KEY": "sk-1",
        "GITHUB_TOKEN": "ghp_x",
        "AWS_SECRET_ACCESS_KEY": "s",
        "DB_PASSWORD": "p",
        "SSH_AUTH_SOCK": "/tmp/agent",
        "DATABASE_URL": "postgres://app:hunter2@db/app",
        "HARMLESS": "sk-looks-like-a-key",
        "MY_TOOL_KEY": "needed",
        "PLAIN": "visible",
    }
    tools = registry(workspace, environ, env_allow=["MY_TOOL_KEY"])
    result = await tools.execute("exec", {"command": "env"})
    assert "PLAIN=visible" in result.text
    assert "MY_TOOL_KEY=needed" in result.text
    for secret in ("sk-1", "ghp_x", "AWS_SECRET", "DB_PASSWORD", "SSH_AUTH", "hunter2", "HARMLESS"):
        assert secret not in result.text


def test_scrub_catches_common_credential_spellings() -> None:
    secrets = {
        "GH_PAT": "x",
        "AZURE_DEVOPS_EXT_PAT": "x",
        "SENTRY_DSN": "https://key@o1.ingest.example/1",
        "JWT": "a.b.c",
        "SLACK_WEBHOOK_URL": "https://hooks.example/T/B/x",
        "PGPASS": "p",
        "STRIPE_SK": "rk_live_123",
    }
    kept, dropped = scrub_environment({**secrets, "PATH": "/bin", "PATTERN": "x", "SKIP": "1"})
    assert sorted(dropped) == sorted(secrets)
    assert kept == {"PATH": "/bin", "PATTERN": "x", "SKIP": "1"}


def test_scrub_reports_dropped_names_and_keeps_pwd() -> None:
    kept, dropped = scrub_environment({"PWD": "/w", "OLDPWD": "/", "API_TOKEN": "t", "X": "1"})
    assert kept == {"PWD": "/w", "OLDPWD": "/", "X": "1"}
    assert dropped == ["API_TOKEN"]


@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(min_value=2, max_value=500))
def test_capture_keeps_exactly_the_head_and_tail(chunks: list[bytes], limit: int) -> None:
    capture = OutputCapture(limit)
    for chunk in chunks:
        capture.feed(chunk)
    stream = b"".join(chunks)
    assert capture.total == len(stream)
    if len(stream) <= limit:
        assert capture.head + capture.tail == stream and capture.omitted == 0
    else:
        assert capture.head == stream[: limit // 2]
        assert capture.tail == stream[len(stream) - (limit - limit // 2) :]
        assert capture.omitted == len(stream) - limit


async def test_a_process_that_calls_setsid_escapes_without_a_sandbox(workspace: Path) -> None:
    """The documented limit: leaving the process group on purpose escapes the kill."""
    command = (
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' > /dev/null 2>&1 & "
        "while [ ! -s escaped.pid ]; do :; done"
    )
    await registry(workspace).execute("exec", {"command": command})
    pid = int((workspace / "escaped.pid").read_text())
    try:
        assert alive(pid)
    finally:
        os.kill(pid, 9)


def test_flags_and_schema() -> None:
    assert ExecTool.exclusive and not ExecTool.read_only
    assert not ExecTool(Path.cwd()).concurrency_safe
    assert ExecTool.parameters["required"] == ["command"]


def test_loader_builds_exec_from_config_and_can_leave_it_out(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, config={"exec": {"max_timeout": 5}})
    tools = {t.name: t for t in ToolLoader().load(ctx)}
    assert isinstance(tools["exec"], ExecTool)
    assert tools["exec"].config.max_timeout == 5
    off = ToolContext(workspace=workspace, config={"exec": {"enabled": False}})
    assert "exec" not in {t.name for t in ToolLoader().load(off)}


def test_bad_config_names_the_field(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, config={"exec": {"max_timeout": -1}})
    with pytest.raises(ToolConfigError, match="max_timeout"):
        ToolLoader().load(ctx)


def test_bwrap_argv_binds_the_workspace_rw_and_the_rest_ro(tmp_path: Path) -> None:
    argv = bwrap_argv("/usr/bin/bwrap", ["/bin/sh", "-c", "ls"], workspace=tmp_path, network=False)
    assert argv[:4] == ["/usr/bin/bwrap", "--die-with-parent", "--new-session", "--unshare-all"]
    assert "--share-net" not in argv
    text = " ".join(argv)
    assert "--ro-bind / /" in text
    assert f"--bind {tmp_path} {tmp_path} --chdir {tmp_path}" in text
    assert text.index("--tmpfs /tmp") < text.index(f"--bind {tmp_path}")  # ws may be in /tmp
    assert argv[-4:] == ["--", "/bin/sh", "-c", "ls"]
    networked = bwrap_argv("bwrap", ["true"], workspace=tmp_path, network=True)
    assert networked[4] == "--share-net"


async def test_bwrap_sandbox_runs_for_real_or_refuses_to_start(workspace: Path) -> None:
    """With bubblewrap installed the sandbox is exercised; without it exec must not start."""
    config = ExecConfig(sandbox="bwrap")
    if shutil.which("bwrap") is None:
        with pytest.raises(ToolConfigError, match="bubblewrap is not installed"):
            ExecTool(workspace, config)
        return
    tools = ToolRegistry([ExecTool(workspace, config, environ=BASE_ENV)])
    command = (
        "echo inside > made.txt; touch /etc/toolbridge-probe 2>/dev/null || echo etc-ro; "
        "grep -c : /proc/net/dev; setsid sleep 300 > /dev/null 2>&1 &"
    )
    result = await tools.execute("exec", {"command": command})
    assert (workspace / "made.txt").read_text() == "inside\n"
    assert "etc-ro" in result.text
    assert result.text.splitlines()[1] == "1"  # only the loopback interface: no network
    assert not file_exists(Path("/etc/toolbridge-probe"))
