"""Run a command as a contained process group: bounded output, bounded time, nothing left behind.

The command gets its own session (so its process group id is its pid), stdin closed,
and one pipe for stdout and stderr together. Output is read as it arrives and only
the head and the tail are kept. When the direct child exits, times out, floods the
pipe, or the caller is cancelled, the whole group is killed - background jobs
included - and reading stops. Only processes that leave the group on purpose
(``setsid``) escape; an OS sandbox is needed to stop those.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CommandResult", "OutputCapture", "run_command", "scrub_environment"]

logger = logging.getLogger(__name__)

# After the group is killed, how long to wait for the pipe to reach end-of-file. Only
# a process that left the group (setsid) can keep it open that long.
DRAIN_SECONDS = 2.0

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
        if not self.omitted:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        return (
            self.head.decode("utf-8", errors="replace")
            + f"\n[... {self.omitted} bytes of output omitted ...]\n"
            + self.tail.decode("utf-8", errors="replace")
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
    """Feeds the pipe into an `OutputCapture`; kills the group when output floods."""

    def __init__(self, capture: OutputCapture, kill_after_bytes: int) -> None:
        self.capture = capture
        self.kill_after_bytes = kill_after_bytes
        self.process_group: int | None = None
        self.overflow = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.capture.feed(data)
        if self.capture.total > self.kill_after_bytes and not self.overflow:
            self.overflow = True
            if self.process_group is not None:
                kill_group(self.process_group)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _spawn(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    output_fd: int,
    pipe: io.FileIO,
) -> asyncio.subprocess.Process:
    """Start `argv` in a new session writing to `output_fd`; a cancelled start still cleans up.

    The start is shielded: when the caller is cancelled half-way, the process may be
    born anyway, so its group is killed as soon as the start completes.
    """
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output_fd,
            stderr=output_fd,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    )
    spawn.add_done_callback(lambda _: os.close(output_fd))
    try:
        return await asyncio.shield(spawn)
    except BaseException:
        pipe.close()
        spawn.add_done_callback(_kill_if_started)
        raise


def _kill_if_started(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    if not spawn.cancelled() and spawn.exception() is None:
        kill_group(spawn.result().pid)


def kill_group(process_group: int) -> None:
    """SIGKILL every process in `process_group`; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process_group, signal.SIGKILL)


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    output_limit: int,
    kill_after_bytes: int,
) -> CommandResult:
    """Run `argv` in its own process group and collect a bounded view of its output.

    Returns once the direct child has exited (or was killed after `time_limit` seconds
    or for flooding the pipe) and the rest of its group has been killed. Cancelling
    the caller kills the group too.
    """
    loop = asyncio.get_running_loop()
    capture = OutputCapture(output_limit)
    reader = _PipeReader(capture, kill_after_bytes)
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", 0)
    process = await _spawn(argv, cwd=cwd, env=env, output_fd=write_fd, pipe=pipe)
    reader.process_group = process.pid
    transport: asyncio.BaseTransport | None = None
    timed_out = False
    try:
        transport, _ = await loop.connect_read_pipe(lambda: reader, pipe)
        try:
            async with asyncio.timeout(time_limit):
                await process.wait()
        except TimeoutError:
            timed_out = True
        kill_group(process.pid)
        exit_code = await process.wait()
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                await reader.closed
        except TimeoutError:
            logger.warning("a process that left the group of %r still holds its output", argv)
    finally:
        kill_group(process.pid)  # also when cancelled or failing half-way
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
