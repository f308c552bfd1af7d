"""`exec`, `write_stdin`, `list_exec_sessions`: shell commands in the workspace, contained.

The command runs with ``/bin/sh -c`` in the workspace (or a directory in it), stdin
closed, with a scratch HOME and the environment scrubbed of credentials; its output
is capped to head and tail and cleaned of terminal control sequences. It always runs
under the supervisor of `toolbridge.execution.process` (nothing it starts outlives the call),
and when bubblewrap works here, inside the sandbox of `toolbridge.security.sandbox`
too (the default, ``sandbox = "auto"``): one sandbox per context session, shared by
its commands (`toolbridge.execution.exec_sessions`). Without the sandbox it is an ordinary
process of this user, and `unsandboxed` decides whether that needs approval (the
default), is allowed, or is refused. See docs/security.md.

With ``yield_time_ms``, a command still running after that long becomes an exec
session: it keeps running, and `write_stdin` writes to it, polls it or ends it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import tempfile
import uuid
import weakref
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolbridge.core.errors import (
    ErrorKind,
    PolicyViolation,
    ToolConfigError,
    ToolError,
    ToolExecutionError,
)
from toolbridge.core.tool import (
    Tool,
    ToolContext,
    ToolResult,
    current_call_owner,
    current_context,
    tool_parameters,
)
from toolbridge.execution.exec_sessions import ExecSession, ExecSessions, SessionLimit
from toolbridge.execution.process import (
    SUPERVISOR,
    CommandResult,
    Supervisor,
    run_command,
    scrub_environment,
)
from toolbridge.security.sandbox import (
    SANDBOX_HOME,
    BubblewrapSandbox,
    SandboxMode,
    find_sandbox,
)
from toolbridge.security.terminal import strip_control_sequences
from toolbridge.security.workspace import InvalidPath, Workspace

__all__ = ["ExecConfig", "ExecTool", "ListExecSessionsTool", "WriteStdinTool"]

logger = logging.getLogger(__name__)

# Where a call's HOME is made without the sandbox: a real directory, never a link, since
# the call supervisor replaces a HOME parent that is not one (see supervisor.py).
_HOST_TMP = os.path.realpath(tempfile.gettempdir())
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
    session_idle_s: float = Field(
        default=1800.0,
        gt=0,
        description="Seconds an exec session (a command left running with yield_time_ms) "
        "may go unpolled before it is ended.",
    )
    max_sessions: int = Field(
        default=8,
        ge=1,
        description="Exec sessions open at once in one context session; past it a new "
        "one is an error.",
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
            "yield_time_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": 30000,
                "description": "Keep the command running: if it is still running after "
                "this many milliseconds, return its output so far and a session_id "
                "(use write_stdin to poll it, write to it or stop it). For servers, "
                "watchers and interactive programs.",
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
        "scratch directory. Long output is shortened to its beginning and end. With "
        "yield_time_ms, a command still running then keeps running as a session (its "
        "stdin open) that write_stdin polls, writes to or stops."
    )

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
        self.sessions = ExecSessions(
            functools.partial(_supervisor, self.sandbox, self.workspace),
            idle_s=self.config.session_idle_s,
            max_sessions=self.config.max_sessions,
            output_limit=self.config.max_output_bytes,
        )
        weakref.finalize(self, self.sessions.close)  # the servers end with the tool
        if self.sandbox is not None:
            network = "with network" if self.config.sandbox_network else "without network"
            self.description = (
                f"{type(self).description} Runs in a sandbox {network}: only the workspace "
                "is writable and persists; HOME is emptied after each call; /tmp is "
                "private to this session's commands."
            )

    @property
    def supervisor(self) -> Supervisor:
        """The supervisor server of the default context session (started on first use)."""
        return self.sessions.supervisor("default", None)

    def companions(self) -> list[Tool]:
        """`write_stdin` and `list_exec_sessions`, sharing this tool's sessions."""
        return [WriteStdinTool(self), ListExecSessionsTool(self)]

    async def release(self, owner: object) -> None:
        """End the exec sessions the calls of `owner` (an executor) started."""
        await asyncio.shield(asyncio.to_thread(self.sessions.release, owner))

    async def end_session(self, session: str) -> bool:
        """End the exec sessions and the sandbox of context session `session`; whether
        an exec session was left running."""
        return bool(await asyncio.shield(asyncio.to_thread(self.sessions.end_context, session)))

    def close(self) -> None:
        """End every exec session and sandbox of this tool (blocking, bounded)."""
        self.sessions.close()

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
        # Made by the command's supervisor, and removed by it when the command has ended.
        scratch = SANDBOX_HOME if self.sandbox is not None else _HOST_TMP
        home = os.path.join(scratch, f"toolbridge-home-{uuid.uuid4().hex}")
        env["HOME"] = home
        argv = [self.config.shell, "-c", command]
        context = _context_session()
        too_long = _too_long(command, argv, env)
        if too_long is not None:
            return too_long
        if kwargs.get("yield_time_ms") is not None:
            return await self._start_session(
                command,
                argv,
                cwd=cwd,
                env=env,
                home=home,
                context=context,
                yield_time_ms=kwargs["yield_time_ms"],
            )
        with self.sessions.calling(context, current_call_owner()) as supervisor:
            result = await run_command(
                argv,
                cwd=cwd,
                env=env,
                time_limit=timeout,
                output_limit=self.config.max_output_bytes,
                kill_after_bytes=self.config.kill_output_bytes,
                supervisor=supervisor,
                home=home,
            )
        notes = []
        if requested and requested > self.config.max_timeout:
            notes.append(f"[timeout capped at the configured maximum of {timeout:g} s]")
        return self._report(result, timeout, notes)

    async def _start_session(
        self,
        command: str,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        home: str,
        context: str,
        yield_time_ms: int,
    ) -> ToolResult:
        """Start `command` as an exec session; report it once it ends or `yield_time_ms` pass."""
        starting = asyncio.ensure_future(
            asyncio.to_thread(
                self.sessions.start,
                context,
                current_call_owner(),
                command,
                argv,
                cwd=cwd,
                env=env,
                home=home,
            )
        )
        try:
            session = await asyncio.shield(starting)
        except asyncio.CancelledError:  # it may start all the same: nobody could reach it
            starting.add_done_callback(self._abandon)
            raise
        except SessionLimit as exc:
            return ToolResult.error(
                ToolError(
                    ErrorKind.EXECUTION_ERROR,
                    f"cannot start another exec session: {exc}",
                    "End one you no longer need with write_stdin(session_id, "
                    "terminate=true) (list_exec_sessions shows them), or run the command "
                    "without yield_time_ms.",
                )
            )
        try:  # its report is the session's first: a write_stdin on it waits for it
            await session.wait(yield_time_ms / 1000)
            return self.session_report(session, self.config.max_output_bytes)
        except BaseException:  # cancelled before it could be reported: nobody can reach it
            session.stop()
            self.sessions.forget(session)
            raise
        finally:
            session.pass_turn(None)

    def _abandon(self, starting: asyncio.Future[ExecSession]) -> None:
        """End the session a cancelled call started (a thread started it meanwhile)."""
        if not starting.cancelled() and starting.exception() is None:
            session = starting.result()
            session.stop()
            self.sessions.forget(session)

    def session_report(self, session: ExecSession, max_chars: int) -> ToolResult:
        """The output of `session` since the last poll and its state, in text and metadata."""
        poll = session.poll()
        output = _shorten(poll.output.rstrip("\n"), max_chars) or "(no output)"
        metadata: dict[str, Any] = {
            "running": poll.running,
            "omitted_bytes": poll.omitted_bytes,
            "sandbox": "bwrap" if self.sandbox else "none",
        }
        if poll.running:
            metadata["session_id"] = session.id
            ending = (
                f"still running: session_id {session.id} (write_stdin polls it, writes to "
                "its stdin or stops it with terminate=true)"
            )
            return ToolResult(f"{output}\n{ending}", metadata=metadata)
        self.sessions.forget(session)
        code = poll.exit_code if poll.exit_code is not None else -signal.SIGKILL
        metadata["exit_code"] = code
        ending = f"Exit code: {code}"
        number = _signal_number(code)
        if number is not None:
            metadata["signal"] = number
            ending += f" (killed by signal {number} ({_signal_name(number)}))"
        return ToolResult(f"{output}\n{ending}", metadata=metadata)

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


@tool_parameters(
    {
        "type": "object",
        "properties": {
            "session_id": {
                "type": "integer",
                "description": "The session_id an exec with yield_time_ms returned.",
            },
            "chars": {
                "type": "string",
                "default": "",
                "description": "Text to write to the command's stdin (include \\n to end "
                "a line); empty to only poll.",
            },
            "close_stdin": {
                "type": "boolean",
                "default": False,
                "description": "Close stdin after writing (end of input).",
            },
            "terminate": {
                "type": "boolean",
                "default": False,
                "description": "Kill the command and everything it started; returns its "
                "last output.",
            },
            "yield_time_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": 30000,
                "default": 1000,
                "description": "How long to wait for output before returning.",
            },
            "wait_for": {
                "type": ["string", "null"],
                "minLength": 1,
                "default": None,
                "description": "Return as soon as this text appears in the output (instead "
                "of waiting yield_time_ms), or after wait_timeout_ms.",
            },
            "wait_timeout_ms": {
                "type": "integer",
                "minimum": 0,
                "maximum": 600000,
                "default": 10000,
                "description": "The longest wait for wait_for.",
            },
            "max_output_chars": {
                "type": "integer",
                "minimum": 100,
                "default": 10000,
                "description": "Output returned at most (its beginning and end).",
            },
        },
        "required": ["session_id"],
        "additionalProperties": False,
    }
)
class WriteStdinTool(Tool):
    """Write to, poll or stop a command that `exec` left running (an exec session)."""

    name = "write_stdin"
    description = (
        "Write to the stdin of a command that exec started with yield_time_ms (by its "
        "session_id), then wait yield_time_ms (or until wait_for text appears) and return "
        "the output produced since the last poll, and whether it still runs or its exit "
        "code. Empty chars only polls; terminate=true kills it and everything it started."
    )
    scopes = frozenset()  # built with its exec tool (`ExecTool.companions`), never on its own

    def __init__(self, exec_tool: ExecTool) -> None:
        self.exec_tool = exec_tool
        # Writing to a shell runs commands: it needs approval wherever exec does.
        self.requires_approval = exec_tool.requires_approval

    async def execute(self, **kwargs: Any) -> ToolResult:
        session_id: int = kwargs["session_id"]
        context = _context_session()
        session = self.exec_tool.sessions.get(context, session_id)
        if session is None:
            return _unknown_session(session_id)
        max_chars: int = kwargs.get("max_output_chars", 10_000)
        if kwargs.get("terminate"):
            session.stop()  # at once: a call waiting on it returns with its end meanwhile
        # The calls on one session take turns; calls on others run meanwhile.
        async with session.turn():
            if self.exec_tool.sessions.get(context, session_id) is not session:
                if kwargs.get("terminate"):  # it ended, by this stop: not the model's mistake
                    return ToolResult(
                        f"Exec session {session_id} was stopped; the call that was waiting "
                        "on it reported its end and output."
                    )
                return _unknown_session(session_id)  # the call before reported its end
            if kwargs.get("terminate"):
                await asyncio.shield(asyncio.to_thread(session.join))
                return self.exec_tool.session_report(session, max_chars)
            with session.in_use():
                problem = await self._write_and_wait(session, kwargs)
            result = self.exec_tool.session_report(session, max_chars)
        if problem is not None:
            result.content = f"Note: {problem}.\n{result.text}"
        return result

    async def _write_and_wait(self, session: ExecSession, kwargs: dict[str, Any]) -> str | None:
        """Write `chars`, close stdin if asked, wait; what went wrong, if anything."""
        chars: str = kwargs.get("chars") or ""
        problem: str | None = None
        if chars:
            try:
                await session.write(chars.encode(), time_limit=10.0)
            except BrokenPipeError:
                problem = "stdin is closed (close_stdin was sent, or the command ended)"
            except TimeoutError:
                problem = "the command has not read its input for 10 s; not all was written"
            except OSError as exc:
                problem = f"writing to stdin failed: {exc.strerror or exc}"
        if kwargs.get("close_stdin"):
            session.close_stdin()
        wait_for: str | None = kwargs.get("wait_for")
        if wait_for:
            limit = kwargs.get("wait_timeout_ms", 10_000)
            if not await session.wait(limit / 1000, wait_for.encode()) and problem is None:
                problem = (
                    f"{wait_for!r} did not appear in the output within {limit} ms"
                    if session.running
                    else f"the command ended before {wait_for!r} appeared in the output"
                )
        else:
            await session.wait(kwargs.get("yield_time_ms", 1000) / 1000)
        return problem


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class ListExecSessionsTool(Tool):
    """List the exec sessions of the caller's session."""

    name = "list_exec_sessions"
    read_only = True
    description = (
        "List the commands exec left running (with yield_time_ms) in this session: "
        "session_id, command, age, and whether each still runs or its exit code."
    )
    scopes = frozenset()  # built with its exec tool (`ExecTool.companions`), never on its own

    def __init__(self, exec_tool: ExecTool) -> None:
        self.exec_tool = exec_tool

    async def execute(self, **kwargs: Any) -> ToolResult:
        rows = self.exec_tool.sessions.listing(_context_session())
        sessions = [
            {
                "session_id": row.session_id,
                "command": row.command,
                "age_s": round(row.age_s, 1),
                "running": row.running,
                **({} if row.running else {"exit_code": row.exit_code}),
            }
            for row in rows
        ]
        if not rows:
            return ToolResult("No exec sessions.", metadata={"sessions": sessions})
        lines = [
            f"session_id {row.session_id}: {_one_line(row.command)} ({row.age_s:.0f} s, "
            + ("running" if row.running else f"exit code {row.exit_code}")
            + ")"
            for row in rows
        ]
        return ToolResult("\n".join(lines), metadata={"sessions": sessions})


def _supervisor(sandbox: BubblewrapSandbox | None, workspace: Path) -> Supervisor:
    """A context session's supervisor server: inside its own sandbox when there is one."""
    if sandbox is None:
        return Supervisor()
    return Supervisor(sandbox.server_argv(workspace, SUPERVISOR), pids_visible=False)


def _context_session() -> str:
    """The registry context session of the running call ("default" outside a call)."""
    try:
        return current_context().session
    except LookupError:
        return "default"


def _shorten(text: str, limit: int) -> str:
    """`text` cut to its first and last `limit` characters in all, the cut marked."""
    if len(text) <= limit:
        return text
    head = limit // 2
    omitted = len(text) - limit
    return (
        f"{text[:head]}\n[... output truncated: {omitted} characters omitted ...]\n"
        f"{text[len(text) - (limit - head) :]}"
    )


def _one_line(command: str, limit: int = 80) -> str:
    line = strip_control_sequences(" ".join(command.split()))
    return line if len(line) <= limit else line[: limit - 3] + "..."


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


def _unknown_session(session_id: int) -> ToolResult:
    return _invalid(
        f"there is no exec session {session_id} in this session (it ended and was "
        "reported already, or it was never started here)",
        "Call list_exec_sessions to see the running ones, or start the command "
        "again with exec and yield_time_ms.",
    )


def _invalid(message: str, hint: str) -> ToolResult:
    return ToolResult.error(ToolError(ErrorKind.INVALID_ARGUMENTS, message, hint))
