"""exec texts a model can act on: a signal named in and out of the sandbox, a NUL byte and a
command line too long for the kernel refused as invalid arguments before anything starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolRegistry
from toolbridge.tools.shell import ExecConfig, ExecTool

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def tools(workspace: Path, sandbox: str) -> ToolRegistry:
    config = ExecConfig.model_validate({"sandbox": sandbox, "unsandboxed": "allow"})
    tool = ExecTool(workspace, config, environ=BASE_ENV)
    assert tool.sandboxed is (sandbox == "bwrap")
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_a_command_killed_by_a_signal_says_so(workspace: Path, sandbox: str) -> None:
    registry = tools(workspace, sandbox)
    killed = await registry.execute("exec", {"command": "echo before; kill -9 $$; echo after"})
    assert not killed.is_error
    assert killed.text.startswith("before\n")
    assert killed.text.splitlines()[-1].endswith("(killed by signal 9 (SIGKILL))")
    assert killed.metadata["signal"] == 9
    segfault = await registry.execute("exec", {"command": "kill -SEGV $$"})
    assert "(killed by signal 11 (SIGSEGV))" in segfault.text
    ordinary = await registry.execute("exec", {"command": "exit 3"})
    assert ordinary.text.splitlines()[-1] == "Exit code: 3"
    assert "signal" not in ordinary.metadata


async def test_the_sandbox_reports_a_signal_as_without_it(workspace: Path) -> None:
    # The command's own supervisor runs inside the sandbox and sees the signal itself;
    # bubblewrap's 128 + N, which a command's own 'exit 143' looked the same as, is gone.
    result = await tools(workspace, "bwrap").execute("exec", {"command": "kill -TERM $$"})
    assert result.metadata["exit_code"] == -15
    assert result.text.splitlines()[-1] == "Exit code: -15 (killed by signal 15 (SIGTERM))"
    own = await tools(workspace, "bwrap").execute("exec", {"command": "exit 143"})
    assert own.metadata["exit_code"] == 143


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_a_nul_byte_is_invalid_arguments_and_nothing_runs(
    workspace: Path, sandbox: str
) -> None:
    result = await tools(workspace, sandbox).execute(
        "exec", {"command": "touch ran.txt\x00; echo x"}
    )
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "contains a NUL byte (at position 13)" in result.text
    assert not (workspace / "ran.txt").exists()


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_a_command_longer_than_the_kernel_takes_is_refused_before_it_starts(
    workspace: Path, sandbox: str
) -> None:
    registry = tools(workspace, sandbox)
    long = "touch ran.txt; : " + "x" * 200_000
    result = await registry.execute("exec", {"command": long})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "the command is 200,017 bytes long" in result.text
    assert "write_file" in result.text
    assert not (workspace / "ran.txt").exists()
    # Just under the limit still runs: the check refuses only what the kernel would.
    fits = await registry.execute("exec", {"command": "echo ok; : " + "x" * 120_000})
    assert fits.text == "ok\nExit code: 0"


async def test_many_arguments_past_the_total_limit_are_refused(workspace: Path) -> None:
    limit = os.sysconf("SC_ARG_MAX")
    environ = {**BASE_ENV, **{f"V{n}": "y" * 100_000 for n in range(limit // 100_000 + 1)}}
    config = ExecConfig(sandbox="none", unsandboxed="allow", env_allow=list(environ))
    registry = ToolRegistry(
        [ExecTool(workspace, config, environ=environ)], context=ToolContext(workspace=workspace)
    )
    result = await registry.execute("exec", {"command": "touch ran.txt"})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert f"the system starts commands of at most {limit:,}" in result.text
    assert not (workspace / "ran.txt").exists()


async def test_a_nul_byte_in_cwd_is_invalid_arguments(workspace: Path) -> None:
    result = await tools(workspace, "none").execute("exec", {"command": "pwd", "cwd": "a\x00b"})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "NUL byte" in result.text
