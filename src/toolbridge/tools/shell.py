"""`exec`: run a shell command in the workspace, contained in time, output and environment.

The command runs with ``/bin/sh -c`` in the workspace (or a directory in it), stdin
closed, with a scratch HOME and the environment scrubbed of credentials; its output
is capped to head and tail and cleaned of terminal control sequences. It always runs
under the supervisor of `toolbridge.process` (nothing it starts outlives the call),
and when bubblewrap works here, inside the sandbox of `toolbridge.security.sandbox`
too (the default, ``sandbox = "auto"``). Without the sandbox it is an ordinary
process of this user, and `unsandboxed` decides whether that needs approval (the
default), is allowed, or is refused. See docs/security.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import tempfile
import weakref
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolbridge.errors import (
    ErrorKind,
    PolicyViolation,
    ToolConfigError,
    ToolError,
    ToolExecutionError,
)
from toolbridge.process import CommandResult, Supervisor, run_command, scrub_environment
from toolbridge.security.sandbox import SANDBOX_HOME, SandboxMode, find_sandbox
from toolbridge.security.workspace import InvalidPath, Workspace
from toolbridge.tool import Tool, ToolContext, ToolResult, tool_parameters

__all__ = ["ExecConfig", "ExecTool"]

logger = logging.getLogger(__name__)

# Variables that would point a program at the user's real directories despite HOME.
_HOME_VARIABLES = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


class ExecConfig(BaseModel):
    """Settings of `exec` (config section ``exec``)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="Set to false to leave the shell tool out.")
    default_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds when the model sets none (max_timeout still applies).",
    )
    max_timeout: float = Field(
        default=600.0, gt=0, description="Upper bound on the model's timeout."
    )
    max_output_bytes: int = Field(
        default=20_000,
        ge=1_000,
        description="Output kept for the model: the first and last halves.",
    )
    kill_output_bytes: int = Field(
        default=10_000_000, ge=1_000, description="Kill the command once it has printed this much."
    )
    env_allow: list[str] = Field(
        default_factory=list,
        description="Variables passed on even though their name or value looks secret.",
    )
    shell: str = "/bin/sh"
    sandbox: SandboxMode = Field(
        default="auto",
        description="'auto': bubblewrap when it is installed and works here, else none; "
        "'bwrap': bubblewrap or a configuration error; 'none': never sandboxed.",
    )
    unsandboxed: Literal["approve", "allow", "refuse"] = Field(
        default="approve",
        description="When a command would run without a sandbox: 'approve' makes every "
        "call need approval, 'allow' runs it, 'refuse' makes every call an error.",
    )
    sandbox_network: bool = Field(
        default=False, description="Let sandboxed commands use the network."
    )
    sandbox_read_paths: list[str] = Field(
        default_factory=list,
        description="Paths hidden in the sandbox (under /home, /root, /run, /tmp) to show "
        "read-only, e.g. '~/.cargo'.",
    )


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "Shell command line, run with /bin/sh -c.",
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before the command and everything it started are "
                "killed (capped by the configured maximum).",
            },
            "cwd": {
                "type": "string",
                "minLength": 1,
                "description": "Directory to run in, relative to the workspace root "
                "(default: the root). Must be inside the workspace.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }
)
class ExecTool(Tool):
    """Run a shell command in the workspace and report its output and exit code."""

    name = "exec"
    description = (
        "Run a shell command (/bin/sh -c) in the workspace root (or `cwd`) and return its "
        "combined stdout and stderr and exit code. stdin is closed, so interactive commands "
        "fail; background processes are killed when the command ends; HOME is an empty "
        "scratch directory. Long output is shortened to its beginning and end."
    )
    exclusive = True

    def __init__(
        self,
        workspace: Path,
        config: ExecConfig | None = None,
        *,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.config = config or ExecConfig()
        try:
            self.guard = Workspace(workspace)
        except ValueError as exc:
            raise ToolConfigError(f"exec: {exc}") from None
        self.workspace = self.guard.root
        self.environ = dict(os.environ if environ is None else environ)
        self.sandbox = find_sandbox(
            self.config.sandbox,
            self.workspace,
            shell=self.config.shell,
            network=self.config.sandbox_network,
            read_paths=self.config.sandbox_read_paths,
        )
        self.requires_approval = self.sandbox is None and self.config.unsandboxed == "approve"
        self.supervisor = Supervisor()
        weakref.finalize(self, self.supervisor.close)  # the server ends with the tool
        if self.sandbox is not None:
            network = "with network" if self.config.sandbox_network else "without network"
            self.description = (
                f"{type(self).description} Runs in a sandbox {network}: only the workspace "
                "is writable and persists; /tmp and HOME are private and emptied after "
                "each call."
            )

    @classmethod
    def config_cls(cls) -> type[BaseModel]:
        return ExecConfig

    @classmethod
    def enabled(cls, ctx: ToolContext) -> bool:
        return ctx.tool_config is None or bool(ctx.tool_config.enabled)

    @classmethod
    def create(cls, ctx: ToolContext) -> ExecTool:
        return cls(ctx.workspace, ctx.tool_config)

    @property
    def sandboxed(self) -> bool:
        """Whether commands run inside bubblewrap (decided once, when the tool is made)."""
        return self.sandbox is not None

    def argv(self, command: str, cwd: Path | None = None) -> list[str]:
        """What is executed for `command`: the shell, inside bubblewrap when sandboxed."""
        shell_argv = [self.config.shell, "-c", command]
        if self.sandbox is None:
            return shell_argv
        return self.sandbox.argv(shell_argv, workspace=self.workspace, cwd=cwd or self.workspace)

    async def execute(self, **kwargs: Any) -> ToolResult:
        if self.sandbox is None and self.config.unsandboxed == "refuse":
            raise PolicyViolation(self._refusal())
        command: str = kwargs["command"]
        if "\x00" in command:
            return _invalid(
                f"the command contains a NUL byte (at position {command.index(chr(0))}), "
                "which no command line can hold",
                "Remove the NUL byte (\\u0000); to produce one, write it with printf '\\0'.",
            )
        try:
            cwd = self._directory(kwargs.get("cwd"))
        except InvalidPath as exc:
            return _invalid(exc.message, exc.hint)
        requested = kwargs.get("timeout")
        timeout = min(requested or self.config.default_timeout, self.config.max_timeout)
        env, dropped = scrub_environment(self.environ, self.config.env_allow)
        if dropped:
            logger.debug("exec: dropped secret-looking variables %s", ", ".join(dropped))
        for name in _HOME_VARIABLES:
            env.pop(name, None)
        home = SANDBOX_HOME if self.sandbox else tempfile.mkdtemp(prefix="toolbridge-home-")
        env["HOME"] = home
        argv = self.argv(command, cwd)
        try:
            too_long = _too_long(command, argv, env)
            if too_long is not None:
                return too_long
            result = await run_command(
                argv,
                cwd=cwd,
                env=env,
                time_limit=timeout,
                output_limit=self.config.max_output_bytes,
                kill_after_bytes=self.config.kill_output_bytes,
                supervisor=self.supervisor,
            )
        finally:
            if self.sandbox is None:
                await asyncio.shield(asyncio.to_thread(shutil.rmtree, home, ignore_errors=True))
        notes = []
        if requested and requested > self.config.max_timeout:
            notes.append(f"[timeout capped at the configured maximum of {timeout:g} s]")
        return self._report(result, timeout, notes)

    def _directory(self, cwd: str | None) -> Path:
        """The real directory `cwd` names inside the workspace (the root when None)."""
        if cwd is None:
            return self.workspace
        real = self.guard.resolve(cwd)  # WorkspaceViolation when it is outside
        if not real.is_dir():
            state = "is not a directory" if real.exists() else "does not exist"
            raise ToolExecutionError(
                f"cwd {cwd!r} {state}",
                hint="Pass a directory inside the workspace (relative to its root), or "
                "leave cwd out to run in the root.",
            )
        return real

    def _refusal(self) -> str:
        why = (
            "sandbox = 'none' is configured"
            if self.config.sandbox == "none"
            else "bubblewrap is not installed or cannot run here"
        )
        return (
            f"exec is refused: no sandbox is available ({why}) and this setup does not run "
            "shell commands without one (exec.unsandboxed = 'refuse'). To allow commands "
            "without a sandbox, the user sets exec.unsandboxed = 'allow' in the "
            "configuration (toolbridge CLI: --allow-unsandboxed-exec), or installs "
            "bubblewrap."
        )

    def _report(self, result: CommandResult, timeout: float, notes: list[str]) -> ToolResult:
        output = result.output.rstrip("\n") or "(no output)"
        metadata = {
            "exit_code": result.exit_code,
            "output_bytes": result.output_bytes,
            "omitted_bytes": result.omitted_bytes,
            "timed_out": result.timed_out,
            "sandbox": "bwrap" if self.sandbox else "none",
        }
        if result.timed_out:
            text = "\n".join(
                [
                    f"Error: the command timed out after {timeout:g} s; it and every process it "
                    "started were killed. Output before the timeout:",
                    output,
                    *notes,
                    f"Split the work into shorter commands, or pass a larger timeout "
                    f"(up to {self.config.max_timeout:g} s).",
                ]
            )
            return ToolResult(text, is_error=True, error_kind=ErrorKind.TIMEOUT, metadata=metadata)
        if result.output_overflow:
            text = "\n".join(
                [
                    f"Error: the command printed more than {self.config.kill_output_bytes} "
                    "bytes and was killed. Output, truncated to its beginning and end:",
                    output,
                    "Redirect large output to a file in the workspace and read parts of it, "
                    "or filter it (grep, head, tail).",
                ]
            )
            return ToolResult(
                text, is_error=True, error_kind=ErrorKind.EXECUTION_ERROR, metadata=metadata
            )
        ending = f"Exit code: {result.exit_code}"
        number = _signal_number(result.exit_code)
        if number is not None:
            metadata["signal"] = number
            ending += f" (killed by signal {number} ({_signal_name(number)}))"
        return ToolResult("\n".join([output, *notes, ending]), metadata=metadata)


# Linux: one argument string may hold at most 32 pages (MAX_ARG_STRLEN), its NUL included.
_MAX_ARG_BYTES = 32 * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 131_072


def _too_long(command: str, argv: list[str], env: dict[str, str]) -> ToolResult | None:
    """The error for a command line the kernel would refuse (E2BIG), before anything starts."""
    size = len(command.encode(errors="surrogateescape"))
    if size >= _MAX_ARG_BYTES:
        return _invalid(
            f"the command is {size:,} bytes long; the system runs commands of at most "
            f"{_MAX_ARG_BYTES - 1:,} bytes",
            "Write the long part to a file with write_file (a script, or the data), and run "
            "a short command that uses it, such as 'sh script.sh'.",
        )
    strings = [*argv, *(f"{name}={value}" for name, value in env.items())]
    total = sum(len(text.encode(errors="surrogateescape")) + 1 for text in strings)
    total += 8 * len(strings)  # the kernel counts a pointer for each as well
    limit = os.sysconf("SC_ARG_MAX") if hasattr(os, "sysconf") else 2_097_152
    if total > limit:
        return _invalid(
            f"the command line and environment take {total:,} bytes; the system starts "
            f"commands of at most {limit:,}",
            "Write the long part to a file with write_file, and run a short command that "
            "uses it, such as 'sh script.sh'.",
        )
    return None


def _signal_number(exit_code: int) -> int | None:
    """The signal that ended a command: a negative code (the process itself was killed), or
    128 + N, which shells, and bubblewrap for a sandboxed command, report for signal N."""
    number = -exit_code if exit_code < 0 else exit_code - 128
    return number if 1 <= number <= 31 else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _invalid(message: str, hint: str) -> ToolResult:
    return ToolResult.error(ToolError(ErrorKind.INVALID_ARGUMENTS, message, hint))
