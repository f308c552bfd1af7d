"""`exec`: run a shell command in the workspace, contained in time, output and environment.

The command runs with ``/bin/sh -c`` in the workspace root, stdin closed, in its own
process group that is killed when the command finishes or times out (background
jobs included). Output is capped to its head and tail, the environment is scrubbed
of credentials, and with ``sandbox = "bwrap"`` it runs inside bubblewrap: the
workspace writable, the rest of the file system read-only, no network. Without the
sandbox it is an ordinary process of this user: see docs/security.md.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolbridge.errors import ErrorKind, ToolConfigError
from toolbridge.process import CommandResult, run_command, scrub_environment
from toolbridge.tool import Tool, ToolContext, ToolResult, tool_parameters

__all__ = ["ExecConfig", "ExecTool", "bwrap_argv"]

logger = logging.getLogger(__name__)


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
    sandbox: Literal["none", "bwrap"] = Field(
        default="none",
        description="'bwrap' runs every command inside bubblewrap (must be installed).",
    )
    sandbox_network: bool = Field(
        default=False, description="Let sandboxed commands use the network."
    )


def bwrap_argv(bwrap: str, command_argv: list[str], *, workspace: Path, network: bool) -> list[str]:
    """The bubblewrap command line: workspace read-write, everything else read-only.

    New namespaces for everything (pid, ipc, uts, user, cgroup, and network unless
    `network`), a private /tmp, /dev and /proc, and the sandbox dies with its parent.
    """
    root = str(workspace)
    return [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        *(["--share-net"] if network else []),
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--bind", root, root,
        "--chdir", root,
        "--",
        *command_argv,
    ]  # fmt: skip


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "Shell command line, run with /bin/sh -c in the workspace root.",
            },
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before the command and everything it started are "
                "killed (capped by the configured maximum).",
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
        "Run a shell command (/bin/sh -c) in the workspace root and return its combined "
        "stdout and stderr and exit code. stdin is closed, so interactive commands fail; "
        "background processes are killed when the command ends. Long output is shortened "
        "to its beginning and end."
    )
    exclusive = True

    def __init__(
        self,
        workspace: Path,
        config: ExecConfig | None = None,
        *,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.workspace = workspace.resolve()
        self.config = config or ExecConfig()
        self.environ = dict(os.environ if environ is None else environ)
        self.bwrap: str | None = None
        if self.config.sandbox == "bwrap":
            self.bwrap = shutil.which("bwrap")
            if self.bwrap is None:
                raise ToolConfigError(
                    "exec is configured with sandbox = 'bwrap' but bubblewrap is not "
                    "installed; install it (e.g. apt-get install bubblewrap) or set "
                    "sandbox = 'none'"
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

    def argv(self, command: str) -> list[str]:
        """What is executed for `command`: the shell, inside bubblewrap when enabled."""
        shell_argv = [self.config.shell, "-c", command]
        if self.bwrap is None:
            return shell_argv
        return bwrap_argv(
            self.bwrap, shell_argv, workspace=self.workspace, network=self.config.sandbox_network
        )

    async def execute(self, **kwargs: Any) -> ToolResult:
        command: str = kwargs["command"]
        requested = kwargs.get("timeout")
        timeout = min(requested or self.config.default_timeout, self.config.max_timeout)
        env, dropped = scrub_environment(self.environ, self.config.env_allow)
        if dropped:
            logger.debug("exec: dropped secret-looking variables %s", ", ".join(dropped))
        result = await run_command(
            self.argv(command),
            cwd=self.workspace,
            env=env,
            time_limit=timeout,
            output_limit=self.config.max_output_bytes,
            kill_after_bytes=self.config.kill_output_bytes,
        )
        notes = []
        if requested and requested > self.config.max_timeout:
            notes.append(f"[timeout capped at the configured maximum of {timeout:g} s]")
        return self._report(result, timeout, notes)

    def _report(self, result: CommandResult, timeout: float, notes: list[str]) -> ToolResult:
        output = result.output.rstrip("\n") or "(no output)"
        metadata = {
            "exit_code": result.exit_code,
            "output_bytes": result.output_bytes,
            "omitted_bytes": result.omitted_bytes,
            "timed_out": result.timed_out,
            "sandbox": self.config.sandbox,
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
                    "bytes and was killed. Output (beginning and end):",
                    output,
                    "Redirect large output to a file in the workspace and read parts of it, "
                    "or filter it (grep, head, tail).",
                ]
            )
            return ToolResult(
                text, is_error=True, error_kind=ErrorKind.EXECUTION_ERROR, metadata=metadata
            )
        return ToolResult(
            "\n".join([output, *notes, f"Exit code: {result.exit_code}"]), metadata=metadata
        )
