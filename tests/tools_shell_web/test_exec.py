"""exec: real subprocesses in a real workspace; processes counted, never timed.

Behaviour that must hold with and without the sandbox runs in both modes: "supervised"
(no sandbox, the supervisor between toolbridge and the command) and "bwrap" (the real
bubblewrap, which .ci/run installs).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbridge import ErrorKind, ToolConfigError, ToolContext, ToolLoader, ToolRegistry
from toolbridge.execution.process import OutputCapture, scrub_environment
from toolbridge.tools.shell import ExecConfig, ExecTool

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
MODES = {
    "supervised": {"sandbox": "none", "unsandboxed": "allow"},
    "bwrap": {"sandbox": "bwrap"},
}


@pytest.fixture(params=sorted(MODES))
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def registry(
    workspace: Path, environ: dict[str, str] | None = None, **config: object
) -> ToolRegistry:
    settings = {**MODES["supervised"], **config}
    tool = ExecTool(workspace, ExecConfig.model_validate(settings), environ=environ or BASE_ENV)
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def marker() -> str:
    """A `sleep` duration no other process uses, to find the sleeper from outside a sandbox."""
    return f"{300 + uuid.uuid4().int % 10**6 / 10**7:.7f}"


def running(token: str) -> list[int]:
    """Host pids of live processes whose command line contains `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


async def started(token: str) -> list[int]:
    """The live processes with `token`, once there is one."""
    for _ in range(6000):  # at least 60 s: only a real hang reaches it on a loaded machine
        if found := running(token):
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"no process with {token!r} ever started")


async def all_gone(token: str) -> bool:
    """Whether every process with `token` is gone within a generous bound."""
    for _ in range(6000):  # at least 60 s: only a real hang reaches it on a loaded machine
        if not running(token):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_output_exit_code_and_workspace_cwd(workspace: Path, mode: str) -> None:
    tools = registry(workspace, **MODES[mode])
    result = await tools.execute("exec", {"command": "pwd; echo err >&2; exit 3"})
    assert not result.is_error
    assert result.text == f"{workspace}\nerr\nExit code: 3"
    assert result.metadata["exit_code"] == 3
    assert result.metadata["sandbox"] == ("none" if mode == "supervised" else "bwrap")


async def test_stdin_is_closed(workspace: Path, mode: str) -> None:
    tools = registry(workspace, **MODES[mode])
    result = await tools.execute("exec", {"command": "cat; read line; echo $?"})
    assert result.text == "1\nExit code: 0"


async def test_a_background_job_neither_keeps_the_call_waiting_nor_survives(
    workspace: Path, mode: str
) -> None:
    token = marker()
    result = await registry(workspace, **MODES[mode]).execute(
        "exec", {"command": f"sleep {token} & echo started"}
    )
    assert result.text == "started\nExit code: 0"
    assert await all_gone(token)


async def test_timeout_kills_everything_the_command_started(workspace: Path, mode: str) -> None:
    token = marker()
    command = f"sleep {token} & setsid sleep {token} & echo before; sleep {token}"
    tools = registry(workspace, **MODES[mode])
    # The limit this test trips also covers starting the supervisor (and bubblewrap) and the
    # command's first line, which must come before it: generous, as on a busy machine.
    result = await tools.execute("exec", {"command": command, "timeout": 10})
    assert result.is_error and result.error_kind is ErrorKind.TIMEOUT
    assert result.text.startswith("Error: the command timed out after 10 s")
    assert "before" in result.text
    assert result.metadata["timed_out"] is True
    assert await all_gone(token)


async def test_cancelling_the_call_kills_everything_and_propagates(
    workspace: Path, mode: str
) -> None:
    token = marker()
    command = f"sleep {token} & setsid sleep {token} & sleep {token}"
    tools = registry(workspace, **MODES[mode])
    task = asyncio.create_task(tools.execute("exec", {"command": command}))
    assert len(await started(token)) >= 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await all_gone(token)


async def test_a_100_mb_flood_is_cut_and_the_command_killed(workspace: Path, mode: str) -> None:
    command = "head -c 100000000 /dev/zero | tr '\\0' a; echo never"
    result = await registry(workspace, **MODES[mode]).execute("exec", {"command": command})
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "printed more than 10000000 bytes and was killed" in result.text
    assert "truncated" in result.text
    assert result.metadata["output_bytes"] < 11_000_000  # reading stops at the limit
    assert len(result.text) < 25_000
    assert "never" not in result.text


async def test_long_output_keeps_head_and_tail_and_says_truncated(workspace: Path) -> None:
    command = "seq 1 100000"
    result = await registry(workspace, max_output_bytes=2000).execute("exec", {"command": command})
    lines = result.text.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-2:] == ["100000", "Exit code: 0"]
    omitted = result.metadata["omitted_bytes"]
    assert f"[... output truncated: {omitted} bytes omitted ...]" in result.text
    assert omitted == len("\n".join(map(str, range(1, 100001))) + "\n") - 2000


async def test_the_timeout_is_capped_by_configuration(workspace: Path) -> None:
    tools = registry(workspace, default_timeout=10, max_timeout=30)
    result = await tools.execute("exec", {"command": "echo ok", "timeout": 1000})
    assert result.text == "ok\n[timeout capped at the configured maximum of 30 s]\nExit code: 0"


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


def test_flags_and_schema() -> None:
    # Not exclusive: a long command holds none of another caller's calls; not read-only,
    # so a batch's calls around it keep their order.
    assert not ExecTool.exclusive and not ExecTool.read_only
    assert not ExecTool(Path.cwd()).concurrency_safe
    assert ExecTool.parameters["required"] == ["command"]
    assert set(ExecTool.parameters["properties"]) == {"command", "timeout", "cwd", "yield_time_ms"}


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
