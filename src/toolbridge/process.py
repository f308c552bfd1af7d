"""Run a command contained: bounded output, bounded time, nothing left behind.

The command gets its own session, stdin closed, and one pipe for stdout and stderr
together. Output is read as it arrives; only the head and the tail are kept, with
terminal control sequences removed. When the direct child exits, times out, floods
the pipe, or the caller is cancelled, everything it started is killed and reading
stops. Supervised (see ``supervisor.py``), that includes processes that left its
process group (``setsid``, double forks); otherwise the process group is killed and
the command must bring its own containment (a PID namespace).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from toolbridge.terminal import strip_control_sequences

__all__ = ["CommandResult", "OutputCapture", "run_command", "scrub_environment"]

logger = logging.getLogger(__name__)

# After the command was stopped, how long to wait for the pipe to reach end-of-file. Only
# a process that escaped the kill can keep it open that long.
DRAIN_SECONDS = 2.0
# How long a supervisor may take to kill everything and exit after a stop.
STOP_SECONDS = 5.0
SUPERVISOR = Path(__file__).with_name("supervisor.py")

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|CREDS|AUTH|COOKIE|PRIVATE|SIGNING"
    r"|BEARER|JWT|DSN|WEBHOOK|PGPASS"
    r"|(^|_)(PASS|PW|PWD|PAT|SK)(_|$)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"[a-z][a-z0-9+.-]*://[^/\s@]+@"  # URL with userinfo: user:password@ or key@ (DSNs)
    r"|-----BEGIN [A-Z ]*PRIVATE KEY"
    r"|^(ghp_|gho_|ghs_|github_pat_|glpat-|sk-|sk_live_|rk_live_|xox[abpr]-|AKIA[0-9A-Z]{16})",
    re.IGNORECASE,
)
_NOT_SECRET = frozenset({"PWD", "OLDPWD"})


def scrub_environment(
    environ: Mapping[str, str], allow: Sequence[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """`environ` without variables whose name or value looks like a credential.

    Names in `allow` are kept whatever they look like. Returns the kept variables
    and the sorted names of the dropped ones (never their values).
    """
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in environ.items():
        looks_secret = name not in _NOT_SECRET and (
            bool(_SECRET_NAME.search(name)) or bool(_SECRET_VALUE.search(value))
        )
        if looks_secret and name not in allow:
            dropped.append(name)
        else:
            kept[name] = value
    return kept, sorted(dropped)


class OutputCapture:
    """Keeps the first and the last bytes of a stream within `limit`, and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk[-self.tail_limit :]
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept output as text, terminal control sequences removed, the cut marked.

        Head and tail are cleaned apart, so a sequence cut in two cannot swallow the note.
        """
        if not self.omitted:
            return strip_control_sequences((self.head + self.tail).decode(errors="replace"))
        return (
            strip_control_sequences(self.head.decode(errors="replace"))
            + f"\n[... output truncated: {self.omitted} bytes omitted ...]\n"
            + strip_control_sequences(self.tail.decode(errors="replace"))
        )


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended and what it printed (head and tail when it printed a lot).

    `exit_code` is negative when a signal ended it (-9 after a kill).
    """

    exit_code: int
    output: str
    output_bytes: int
    omitted_bytes: int
    timed_out: bool
    output_overflow: bool


class _PipeReader(asyncio.Protocol):
    """Feeds the pipe into an `OutputCapture`; stops the command when output floods."""

    def __init__(self, capture: OutputCapture, kill_after_bytes: int) -> None:
        self.capture = capture
        self.kill_after_bytes = kill_after_bytes
        self.stop: Callable[[], None] | None = None
        self.overflow = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.capture.feed(data)
        if self.capture.total > self.kill_after_bytes and not self.overflow:
            self.overflow = True
            if self.stop is not None:
                self.stop()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class _Control:
    """How a running command is stopped early, and the fds to close once it has started.

    Supervised, stopping closes the supervisor's stdin (it then kills every descendant
    and exits); otherwise the command's process group is killed.
    """

    def __init__(self, *, supervised: bool, output_fd: int) -> None:
        self.pid: int | None = None
        self.child_fds = [output_fd]
        self.control_fd: int | None = None
        self.stdin_fd: int = asyncio.subprocess.DEVNULL
        if supervised:
            self.stdin_fd, self.control_fd = os.pipe()
            self.child_fds.append(self.stdin_fd)

    def started(self, pid: int) -> None:
        self.pid = pid

    def close_child_fds(self) -> None:
        for fd in self.child_fds:
            os.close(fd)
        self.child_fds = []

    def stop(self) -> None:
        """Ask for the end of the command and everything it started (idempotent)."""
        if self.control_fd is not None:
            os.close(self.control_fd)
            self.control_fd = None
        elif self.pid is not None:
            kill_group(self.pid)


async def _spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output_fd: int,
    control: _Control,
    pipe: io.FileIO,
) -> asyncio.subprocess.Process:
    """Start `argv` in a new session writing to `output_fd`; a cancelled start still cleans up.

    The start is shielded: when the caller is cancelled half-way, the process may be
    born anyway, so it is stopped as soon as the start completes.
    """
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=control.stdin_fd,
            stdout=output_fd,
            stderr=output_fd,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    )
    spawn.add_done_callback(lambda _: control.close_child_fds())
    try:
        process = await asyncio.shield(spawn)
    except BaseException:
        pipe.close()
        spawn.add_done_callback(lambda done: _stop_if_started(done, control))
        raise
    control.started(process.pid)
    return process


def _stop_if_started(spawn: asyncio.Future[asyncio.subprocess.Process], control: _Control) -> None:
    if not spawn.cancelled() and spawn.exception() is None:
        control.started(spawn.result().pid)
        control.stop()


def kill_group(process_group: int) -> None:
    """SIGKILL every process in `process_group`; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process_group, signal.SIGKILL)


async def _wait_stopped(process: asyncio.subprocess.Process, control: _Control) -> int:
    """Stop the command and wait for its exit; a supervisor that does not end is killed."""
    control.stop()
    try:
        async with asyncio.timeout(STOP_SECONDS):
            return await process.wait()
    except TimeoutError:
        logger.warning("the exec supervisor did not end %s s after a stop; killed", STOP_SECONDS)
        kill_group(process.pid)
        return await process.wait()


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    output_limit: int,
    kill_after_bytes: int,
    supervised: bool = False,
) -> CommandResult:
    """Run `argv` in its own session and collect a bounded view of its output.

    Returns once the direct child has exited (or was stopped after `time_limit` seconds
    or for flooding the pipe) and everything it started has been killed. Cancelling
    the caller stops it too. `supervised` puts the supervisor (see
    ``toolbridge/supervisor.py``) between this process and `argv`: it finds and kills
    descendants that left the command's process group, and keeps the command from
    signalling this process. Without it only the command's group is killed, which is
    right when `argv` brings its own containment (a bubblewrap PID namespace).
    """
    loop = asyncio.get_running_loop()
    capture = OutputCapture(output_limit)
    reader = _PipeReader(capture, kill_after_bytes)
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", 0)
    control = _Control(supervised=supervised, output_fd=write_fd)
    if supervised:
        argv = [sys.executable, "-I", "-S", str(SUPERVISOR), *argv]
    process = await _spawn(argv, cwd=cwd, env=env, output_fd=write_fd, control=control, pipe=pipe)
    reader.stop = control.stop
    transport: asyncio.BaseTransport | None = None
    timed_out = False
    try:
        transport, _ = await loop.connect_read_pipe(lambda: reader, pipe)
        try:
            async with asyncio.timeout(time_limit):
                await process.wait()
        except TimeoutError:
            timed_out = True
        exit_code = await _wait_stopped(process, control)
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                await reader.closed
        except TimeoutError:
            logger.warning("a process that escaped the kill of %r still holds its output", argv)
    finally:
        control.stop()  # also when cancelled or failing half-way
        if transport is not None:
            transport.close()
        else:
            pipe.close()
    return CommandResult(
        exit_code=exit_code,
        output=capture.text(),
        output_bytes=capture.total,
        omitted_bytes=capture.omitted,
        timed_out=timed_out,
        output_overflow=reader.overflow,
    )
