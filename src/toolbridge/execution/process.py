"""Run a command contained: bounded output, bounded time, nothing left behind.

Every command runs under a call supervisor (``supervisor.py``), forked by a
long-lived supervisor server that `Supervisor` starts once per owner. The command
gets its own session, stdin closed, and one pipe for stdout and stderr together.
Output is read as it arrives; only the head and the tail are kept, with terminal
control sequences removed. When the command exits, times out, floods the pipe, or the
caller is cancelled, the call supervisor kills everything it started (``setsid`` and
double-forked descendants included) and reports how the command ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from toolbridge.security.names import shown
from toolbridge.security.terminal import strip_control_sequences

__all__ = [
    "CommandResult",
    "OutputCapture",
    "Supervisor",
    "run_command",
    "scrub_environment",
    "server_command",
]

logger = logging.getLogger(__name__)

# After the command was stopped, how long to wait for the pipe to reach end-of-file. Only
# a process that escaped the kill can keep it open that long.
DRAIN_SECONDS = 2.0
# How long a supervisor may take to kill everything and report after a stop.
STOP_SECONDS = 5.0
SUPERVISOR = Path(__file__).with_name("supervisor.py")

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|CREDS|AUTH|COOKIE|PRIVATE|SIGNING"
    r"|BEARER|JWT|DSN|WEBHOOK|PGPASS"
    r"|(^|_)(PASS|PW|PWD|PAT|SK)(_|$)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    # URL with userinfo: user:password@ or key@ (DSNs). The scheme starts where no scheme
    # character precedes it: tried at every letter, a long value took quadratic time.
    r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s@]+@"
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
            return _text(self.head + self.tail)
        return (
            _text(self.head)
            + f"\n[... output truncated: {self.omitted} bytes omitted ...]\n"
            + _text(self.tail)
        )


def _text(output: bytes | bytearray) -> str:
    """`output` decoded, each byte that is not UTF-8 written ``\\xNN`` as the file tools
    show a name's (U+FFFD hid which file `ls` listed), without control sequences."""
    return shown(strip_control_sequences(output.decode(errors="surrogateescape")))


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
        self.transport: asyncio.BaseTransport | None = None
        self.overflow = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.capture.feed(data)
        if self.capture.total > self.kill_after_bytes and not self.overflow:
            self.overflow = True
            # Read no more: the command blocks on the full pipe until it is killed, so
            # what it printed in the meantime is neither read nor counted.
            assert isinstance(self.transport, asyncio.ReadTransport)
            self.transport.pause_reading()
            if self.stop is not None:
                self.stop()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def server_command() -> list[str]:
    """How the supervisor server starts when it runs as a plain process of this user."""
    return [sys.executable, "-I", "-S", str(SUPERVISOR)]


class Supervisor:
    """The supervisor server of one owner (a sandbox session): one fork per command.

    The server (``toolbridge/execution/supervisor.py``) starts on first use and lives until
    `close` (or until this process exits, since it ends at end-of-file on its socket).
    `command` starts it: by default a plain process; a sandbox session starts it inside
    bubblewrap, where its pids are not this host's (`pids_visible` False).
    A server that died, killed by a command say, is replaced on the next launch.
    Thread-safe; each launch is independent of the event loop that runs it.
    """

    def __init__(self, command: Sequence[str] | None = None, *, pids_visible: bool = True) -> None:
        self.command = list(command) if command is not None else server_command()
        self.pids_visible = pids_visible
        self._lock = threading.Lock()
        self._server: subprocess.Popen[bytes] | None = None
        self._socket: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (for tests and diagnostics)."""
        server = self._server
        return server.pid if server is not None and server.poll() is None else None

    @property
    def running(self) -> bool:
        """Whether the server has been started and has not ended."""
        server = self._server
        return server is not None and server.poll() is None

    def launch(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        output_fd: int,
        stdin_fd: int | None = None,
        home: str = "",
    ) -> socket.socket:
        """Start `argv` under a new call supervisor; returns the call's channel (non-blocking).

        The command writes to `output_fd` and reads `stdin_fd` (default: /dev/null); the
        caller keeps and closes its own copies. `home`, when given, is made before the
        command starts and removed after it ended. Shutting the channel down for writing
        stops the command; the channel then reports how it ended (see ``supervisor.py``).
        """
        request = {"argv": list(argv), "cwd": str(cwd), "env": dict(env), "home": home}
        payload = json.dumps(request).encode()
        header = len(payload).to_bytes(8, "big")
        channel, call_end = socket.socketpair()
        fds = [output_fd, call_end.fileno(), *([] if stdin_fd is None else [stdin_fd])]
        try:
            with self._lock:
                for attempt in (1, 2):
                    server = self._connect()
                    try:
                        socket.send_fds(server, [header], fds)
                        server.sendall(payload)
                        break
                    except OSError:
                        self._shut()
                        if attempt == 2:
                            raise
                        logger.warning("the exec supervisor was gone; starting a new one")
        except BaseException:
            channel.close()
            raise
        finally:
            call_end.close()
        channel.setblocking(False)
        return channel

    def close(self) -> None:
        """End the server (calls already running finish under their own supervisors)."""
        with self._lock:
            self._shut()

    def _connect(self) -> socket.socket:
        if self._socket is not None and self._server is not None and self._server.poll() is None:
            return self._socket
        self._shut()
        ours, theirs = socket.socketpair()
        with theirs:
            self._server = subprocess.Popen(
                self.command,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        self._socket = ours
        return ours

    def _shut(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._server is not None:
            try:
                self._server.wait(timeout=STOP_SECONDS)  # it ends at end-of-file at once
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
            self._server = None


class _Channel:
    """The host's end of one call: the supervisor's pid, how the command ended, and stop."""

    def __init__(self, sock: socket.socket, *, pids_visible: bool = True) -> None:
        self.sock = sock
        self.pids_visible = pids_visible
        self.buffer = b""
        self.supervisor_pid: int | None = None
        self.exit_code: int | None = None
        self.stopped = False

    def stop(self) -> None:
        """Ask the call supervisor to kill everything and report (idempotent, synchronous)."""
        if not self.stopped:
            self.stopped = True
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    async def ended(self) -> int:
        """The command's exit code (negative: killed by that signal), once it is known.

        Safe to cancel and call again: what was read stays in the buffer.
        """
        loop = asyncio.get_running_loop()
        while self.exit_code is None:
            line, found, rest = self.buffer.partition(b"\n")
            if not found:
                chunk = await loop.sock_recv(self.sock, 4096)
                if not chunk:  # the call supervisor died without a report (kill -9)
                    logger.warning("the exec call supervisor ended without reporting")
                    self.exit_code = -signal.SIGKILL
                    break
                self.buffer += chunk
                continue
            self.buffer = rest
            word, _, number = line.decode().partition(" ")
            if word == "pid":
                self.supervisor_pid = int(number)
            elif word == "exit":
                self.exit_code = int(number)
            elif word == "signal":
                self.exit_code = -int(number)
        return self.exit_code

    async def ended_after_stop(self) -> int:
        """Stop, then wait for the report; a call supervisor that does not end is killed."""
        self.stop()
        try:
            async with asyncio.timeout(STOP_SECONDS):
                return await self.ended()
        except TimeoutError:
            logger.warning("the exec call supervisor did not end %s s after a stop", STOP_SECONDS)
            if self.supervisor_pid is not None and self.pids_visible:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.supervisor_pid, signal.SIGKILL)
            return await self.ended()


async def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    output_limit: int,
    kill_after_bytes: int,
    supervisor: Supervisor,
    home: str = "",
) -> CommandResult:
    """Run `argv` under a call supervisor of `supervisor` and keep a bounded view of its output.

    Returns once the command has exited (or was stopped after `time_limit` seconds or
    for flooding the pipe) and everything it started has been killed, `setsid` and
    double-forked descendants included. Cancelling the caller stops it too. `home` is
    the command's scratch HOME, made before it starts and removed once it ended.
    """
    loop = asyncio.get_running_loop()
    capture = OutputCapture(output_limit)
    reader = _PipeReader(capture, kill_after_bytes)
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", 0)
    try:
        sock = supervisor.launch(argv, cwd=cwd, env=env, output_fd=write_fd, home=home)
    except BaseException:
        pipe.close()
        raise
    finally:
        os.close(write_fd)
    channel = _Channel(sock, pids_visible=supervisor.pids_visible)
    reader.stop = channel.stop
    transport: asyncio.BaseTransport | None = None
    timed_out = False
    try:
        transport, _ = await loop.connect_read_pipe(lambda: reader, pipe)
        try:
            async with asyncio.timeout(time_limit):
                await channel.ended()
        except TimeoutError:
            timed_out = True
        exit_code = await channel.ended_after_stop()
        if not reader.overflow:  # after a flood, reading stopped: the rest is dropped
            try:
                async with asyncio.timeout(DRAIN_SECONDS):
                    await reader.closed
            except TimeoutError:
                logger.warning("a process that escaped the kill of %r holds its output", argv)
    finally:
        channel.stop()  # also when cancelled or failing half-way
        sock.close()
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
