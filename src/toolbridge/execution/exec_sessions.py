"""Commands that keep running: one sandbox per context session, exec sessions inside it.

A *sandbox session* (`SandboxSession`) is the exec supervisor server of one registry
context session: inside a long-lived bubblewrap when the sandbox is on, a plain process
when it is off. It starts on the first command of that context session; every command
of the session, plain ``exec`` calls included, starts in it (a fork there, not a new
bubblewrap), so a server one command starts is reachable from the next.

An *exec session* (`ExecSession`) is a command that was still running when its
``yield_time_ms`` passed: it keeps running under its call supervisor, its stdin a pipe
toolbridge writes to, its output read continuously by a thread into a bounded buffer.
It ends (its whole process tree killed) on terminate, on `ExecSessions.release` of the
executor whose calls started it, on `ExecSessions.close`, after `idle_s` without a
poll, or when this process exits (its channel and the server's socket close then).
The calls on one exec session take turns (`ExecSession.turn`), in the order they came;
calls on different sessions, and every other call, run beside them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import select
import signal
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolbridge.execution.process import DRAIN_SECONDS, STOP_SECONDS, OutputCapture, Supervisor

__all__ = ["ExecSession", "ExecSessions", "Poll", "SandboxSession", "SessionInfo", "SessionLimit"]

logger = logging.getLogger(__name__)

# Raw output kept to find a `wait_for` text in what arrived since the last poll.
_WINDOW_BYTES = 65_536


_Turn = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]


class SessionLimit(Exception):
    """A context session already has as many exec sessions open as allowed."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One row of `list_exec_sessions`."""

    session_id: int
    command: str
    age_s: float
    running: bool
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class Poll:
    """What a poll of an exec session found: output since the last poll, and its state."""

    output: str
    omitted_bytes: int
    running: bool
    exit_code: int | None


class SandboxSession:
    """The supervisor server (in its sandbox, when there is one) of one context session."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.last_used = time.monotonic()
        self.calls = 0  # plain exec calls running in it now
        self.owners: weakref.WeakSet[Any] = weakref.WeakSet()  # executors that used it

    def close(self) -> None:
        """End the server; a sandbox's namespace, and everything in it, ends with it."""
        self.supervisor.close()


class ExecSession:
    """A running command: its channel, its stdin, and a thread reading its output."""

    def __init__(
        self,
        session_id: int,
        command: str,
        context: str,
        owner: object | None,
        *,
        output_limit: int,
    ) -> None:
        self.id = session_id
        self.command = command
        self.context = context
        self.owner = weakref.ref(owner) if owner is not None else None
        self.started = time.monotonic()
        self.last_used = self.started
        self.waiting = 0  # polls waiting on it now: the idle limit spares it meanwhile
        self.exit_code: int | None = None
        self.output_limit = output_limit
        self._capture = OutputCapture(output_limit)
        self._window = bytearray()
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None], bytes]] = []
        # The calls waiting for their turn on it, the one whose turn it is first; None is
        # the exec call that started it, whose report comes before any other call's.
        self._turns: deque[_Turn | None] = deque([None])
        self._channel: socket.socket | None = None
        self._stdin: int | None = None
        self._thread: threading.Thread | None = None

    def start(
        self,
        supervisor: Supervisor,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        home: str,
    ) -> None:
        """Launch the command under a call supervisor of `supervisor` and start reading."""
        output_read, output_write = os.pipe()
        stdin_read, stdin_write = os.pipe()
        try:
            channel = supervisor.launch(
                argv, cwd=cwd, env=env, output_fd=output_write, stdin_fd=stdin_read, home=home
            )
        except BaseException:
            for fd in (output_read, stdin_write):
                os.close(fd)
            raise
        finally:
            os.close(output_write)
            os.close(stdin_read)
        channel.setblocking(True)
        os.set_blocking(stdin_write, False)
        self._channel, self._stdin = channel, stdin_write
        self._thread = threading.Thread(
            target=self._read, args=(output_read, channel), name=f"exec-session-{self.id}"
        )
        self._thread.daemon = True
        self._thread.start()

    @property
    def running(self) -> bool:
        return not self._ended.is_set()

    @property
    def buffered_bytes(self) -> int:
        """Output held until the next poll (bounded, however much the command prints)."""
        with self._lock:
            return len(self._capture.head) + len(self._capture.tail) + len(self._window)

    def matches(self, owner: object) -> bool:
        return self.owner is not None and self.owner() is owner

    # --- the reading thread ---------------------------------------------------------------

    def _read(self, pipe: int, channel: socket.socket) -> None:
        """Read output and the channel's report until both are done; then wake the waiters."""
        try:
            report = self._pump(pipe, channel)
            while (code := _exit_code(report, ended=False)) is None:  # output ended first
                chunk = channel.recv(4096)
                if not chunk:
                    code = _exit_code(report, ended=True)
                    break
                report += chunk
            self.exit_code = code
        except OSError as exc:
            logger.warning("reading exec session %s failed: %s", self.id, exc)
            if self.exit_code is None:
                self.exit_code = -signal.SIGKILL
        finally:
            os.close(pipe)
            channel.close()
            with self._lock:
                if self._stdin is not None:
                    os.close(self._stdin)
                    self._stdin = None
                self._ended.set()
                waiters, self._waiters = self._waiters, []
            for loop, future, _ in waiters:
                _wake(loop, future)

    def _pump(self, pipe: int, channel: socket.socket) -> bytes:
        """Feed the output until end-of-file (or a drain limit after the command ended);
        returns what the channel reported so far."""
        poller = select.poll()
        poller.register(pipe, select.POLLIN)
        poller.register(channel.fileno(), select.POLLIN)
        report = b""
        drain_until: float | None = None
        while True:
            timeout_ms = None
            if drain_until is not None:
                timeout_ms = int(max(0.0, drain_until - time.monotonic()) * 1000)
                if timeout_ms == 0:
                    logger.warning("a process that escaped the kill holds session %s", self.id)
                    return report
            for fd, _ in poller.poll(timeout_ms):
                if fd == pipe:
                    data = os.read(pipe, 65_536)
                    if not data:
                        return report
                    self._feed(data)
                    continue
                chunk = channel.recv(4096)
                report += chunk
                code = _exit_code(report, ended=not chunk)
                if code is not None:  # reported (or the supervisor died): drain the rest
                    poller.unregister(fd)
                    self.exit_code = code
                    drain_until = time.monotonic() + DRAIN_SECONDS

    def _feed(self, data: bytes) -> None:
        with self._lock:
            self._capture.feed(data)
            self._window += data
            if len(self._window) > _WINDOW_BYTES:
                del self._window[: len(self._window) - _WINDOW_BYTES]
            woken = [w for w in self._waiters if w[2] and w[2] in self._window]
            if woken:
                self._waiters = [w for w in self._waiters if w not in woken]
        for loop, future, _ in woken:
            _wake(loop, future)

    # --- what the tools do ------------------------------------------------------------------

    async def write(self, data: bytes, *, time_limit: float) -> None:
        """Write `data` to the command's stdin; an error when it is closed or not read."""
        loop = asyncio.get_running_loop()
        while data:
            with self._lock:
                fd = self._stdin
                if fd is None:
                    raise BrokenPipeError("stdin is closed")
                try:
                    written = os.write(fd, data)
                except BlockingIOError:
                    written = 0
            data = data[written:]
            if data:
                ready: asyncio.Future[None] = loop.create_future()
                loop.add_writer(fd, _wake, loop, ready)
                try:
                    async with asyncio.timeout(time_limit):
                        await ready
                finally:
                    loop.remove_writer(fd)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this call's turn on the session (the calls before it have returned);
        hold it for the `async with` block. A poll that interleaved with another would
        take the other's output, or write in the middle of its wait."""
        loop = asyncio.get_running_loop()
        mine: _Turn = (loop, loop.create_future())
        with self._lock:
            self._turns.append(mine)
            if self._turns[0] is mine:
                mine[1].set_result(None)
        try:
            await mine[1]
            yield
        finally:
            self.pass_turn(mine)

    def pass_turn(self, turn: _Turn | None) -> None:
        """Give up `turn` (None: the starting exec call's), or stop waiting for it; the
        next call's turn comes when the one that had it gives it up."""
        with self._lock:
            first = self._turns[0] is turn
            self._turns.remove(turn)
            following = self._turns[0] if first and self._turns else None
        if following is not None:
            _wake(*following)

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """While a poll writes to or waits on it: the idle limit spares it meanwhile."""
        with self._lock:
            self.waiting += 1
        try:
            yield
        finally:
            with self._lock:
                self.waiting -= 1
                self.last_used = time.monotonic()

    def close_stdin(self) -> None:
        with self._lock:
            if self._stdin is not None:
                os.close(self._stdin)
                self._stdin = None

    async def wait(self, seconds: float, pattern: bytes = b"") -> bool:
        """Wait until the command ends, `pattern` shows in the unread output, or `seconds`
        pass; True when the pattern was seen (or none was asked for and it ended)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if pattern and pattern in self._window:
                return True
            if not self.running:
                return not pattern
            waiter = (loop, future, pattern)
            self._waiters.append(waiter)
        try:
            async with asyncio.timeout(seconds):
                await future
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        with self._lock:
            return (not pattern and not self.running) or bool(pattern and pattern in self._window)

    def stop(self) -> None:
        """Ask the call supervisor to kill the whole process tree (returns at once)."""
        channel = self._channel
        if channel is not None:
            with contextlib.suppress(OSError):
                channel.shutdown(socket.SHUT_WR)

    def join(self, seconds: float = STOP_SECONDS + DRAIN_SECONDS) -> None:
        """Wait (blocking) until the reading thread has seen the end."""
        if self._thread is not None:
            self._thread.join(seconds)

    def poll(self) -> Poll:
        """Take the output since the last poll, and say whether the command still runs.

        While it runs, a character or control sequence cut by the poll stays for the next
        one: decoded or cleaned in halves, it would show as two replacement characters, or
        leave the end of a colour sequence (``1m``) in the text.
        """
        with self._lock:
            capture, self._capture = self._capture, OutputCapture(self.output_limit)
            self._window.clear()
            running = self.running
            last = capture.tail or capture.head
            cut = _unfinished(bytes(last[-_CARRY_BYTES:])) if running else 0
            if cut:
                carry = bytes(last[-cut:])
                del last[-cut:]
                capture.total -= cut
                self._capture.feed(carry)
                self._window += carry
        self.last_used = time.monotonic()
        return Poll(
            capture.text(),
            capture.omitted,
            running,
            None if running else self.exit_code,
        )

    def info(self) -> SessionInfo:
        return SessionInfo(
            self.id,
            self.command,
            time.monotonic() - self.started,
            self.running,
            None if self.running else self.exit_code,
        )


class ExecSessions:
    """The sandbox sessions and exec sessions of one exec tool, by context session.

    Thread-safe. An idle-limit thread, started with the first sandbox, ends exec
    sessions nobody polled for `idle_s` seconds, and sandboxes with no exec session
    left that nobody used for that long.
    """

    def __init__(
        self,
        make_supervisor: Callable[[], Supervisor],
        *,
        idle_s: float,
        max_sessions: int,
        output_limit: int,
    ) -> None:
        self.make_supervisor = make_supervisor
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self.output_limit = output_limit
        self._lock = threading.Lock()
        self._boxes: dict[str, SandboxSession] = {}
        self._sessions: dict[tuple[str, int], ExecSession] = {}
        # numbered per context session: an id says nothing of another session's activity
        self._next_id: dict[str, int] = {}
        self._closed = threading.Event()
        self._reaper: threading.Thread | None = None

    def supervisor(self, context: str, owner: object | None) -> Supervisor:
        """The supervisor of `context`'s sandbox, started on first use."""
        with self._lock:
            return self._box(context, owner).supervisor

    @contextlib.contextmanager
    def calling(self, context: str, owner: object | None) -> Iterator[Supervisor]:
        """`context`'s supervisor for one plain call: its sandbox stays while the call runs."""
        with self._lock:
            box = self._box(context, owner)
            box.calls += 1
        try:
            yield box.supervisor
        finally:
            with self._lock:
                box.calls -= 1
                box.last_used = time.monotonic()

    def _box(self, context: str, owner: object | None) -> SandboxSession:
        box = self._boxes.get(context)
        if box is None:
            box = self._boxes[context] = SandboxSession(self.make_supervisor())
            self._start_reaper()
        box.last_used = time.monotonic()
        if owner is not None:
            with contextlib.suppress(TypeError):  # an owner that takes no weak reference
                box.owners.add(owner)
        return box

    def start(
        self,
        context: str,
        owner: object | None,
        command: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        home: str,
    ) -> ExecSession:
        """Start `argv` as a new exec session of `context`; `SessionLimit` past the cap."""
        supervisor = self.supervisor(context, owner)
        with self._lock:
            mine = [s for s in self._sessions.values() if s.context == context]
            if len(mine) >= self.max_sessions:
                ended = [str(s.id) for s in mine if not s.running]
                detail = (
                    f" ({len(mine) - len(ended)} running; {', '.join(ended)} ended but not "
                    "polled since: a poll with write_stdin reports its end and frees its place)"
                    if ended
                    else ""
                )
                raise SessionLimit(
                    f"{len(mine)} exec sessions are open in this session, the most allowed "
                    f"(exec.max_sessions = {self.max_sessions}){detail}"
                )
            number = self._next_id.get(context, 1)
            self._next_id[context] = number + 1
            session = ExecSession(number, command, context, owner, output_limit=self.output_limit)
            self._sessions[context, number] = session
        try:
            session.start(supervisor, argv, cwd=cwd, env=env, home=home)
        except BaseException:
            self.forget(session)
            raise
        return session

    def get(self, context: str, session_id: int) -> ExecSession | None:
        """The exec session `session_id` of `context`; None for another context's."""
        with self._lock:
            return self._sessions.get((context, session_id))

    def listing(self, context: str) -> list[SessionInfo]:
        with self._lock:
            return [s.info() for s in self._sessions.values() if s.context == context]

    def forget(self, session: ExecSession) -> None:
        """Drop an ended session (its end was reported)."""
        with self._lock:
            self._sessions.pop((session.context, session.id), None)

    def release(self, owner: object) -> None:
        """End the exec sessions `owner`'s calls started, and the sandboxes its calls used
        that nothing else uses now (no exec session, no call running)."""
        self._release(lambda s: s.matches(owner), lambda _, box: owner in box.owners)

    def end_context(self, context: str) -> int:
        """End the exec sessions of context session `context`, and its sandbox unless a
        call still runs in it (the idle limit ends it then); how many sessions ended. Its
        session numbering goes too: a context session ended this way (an MCP request's
        own) is not used again, and one kept per request would grow without end."""
        ended = self._release(lambda s: s.context == context, lambda c, _: c == context)
        with self._lock:
            if not any(s.context == context for s in self._sessions.values()):
                self._next_id.pop(context, None)
        return ended

    def _release(
        self,
        sessions: Callable[[ExecSession], bool],
        boxes: Callable[[str, SandboxSession], bool],
    ) -> int:
        with self._lock:
            ending = [s for s in self._sessions.values() if sessions(s)]
        self._end(ending)
        with self._lock:
            busy = {s.context for s in self._sessions.values()}
            done = [
                c
                for c, box in self._boxes.items()
                if boxes(c, box) and c not in busy and not box.calls
            ]
            closing = [self._boxes.pop(c) for c in done]
        for box in closing:
            box.close()
        return len(ending)

    def close(self) -> None:
        """End every exec session and every sandbox (blocking, bounded)."""
        self._closed.set()
        with self._lock:
            ending = list(self._sessions.values())
            boxes = list(self._boxes.values())
            self._boxes.clear()
        self._end(ending)
        for box in boxes:
            box.close()

    def _end(self, sessions: list[ExecSession]) -> None:
        """Forget `sessions`, then end them: once one has ended this way, no poll finds
        it (a poll racing the idle limit or `release` is told it is gone, never given
        an exit code that hides why)."""
        for session in sessions:
            self.forget(session)
        for session in sessions:
            session.stop()
        for session in sessions:
            session.join()

    def _start_reaper(self) -> None:
        if self._reaper is None and not self._closed.is_set():
            self._reaper = threading.Thread(
                target=self._reap, name="exec-sessions-idle", daemon=True
            )
            self._reaper.start()

    def _reap(self) -> None:
        """End what stayed idle past the limit, until `close`."""
        interval = max(0.05, min(self.idle_s / 4, 5.0))
        while not self._closed.wait(interval):
            limit = time.monotonic() - self.idle_s
            with self._lock:
                idle = [s for s in self._sessions.values() if s.last_used < limit and not s.waiting]
            if idle:
                logger.info(
                    "exec sessions %s idle for %g s: ending them",
                    ", ".join(str(s.id) for s in idle),
                    self.idle_s,
                )
                self._end(idle)
            with self._lock:
                busy = {s.context for s in self._sessions.values()}
                quiet = [
                    c
                    for c, b in self._boxes.items()
                    if c not in busy and not b.calls and b.last_used < limit
                ]
                boxes = [self._boxes.pop(c) for c in quiet]
            for box in boxes:
                box.close()


# The most output a poll holds back for the next one: the end of a control sequence
# (an OSC title can be long; one that never ends is shown cleaned after this much).
_CARRY_BYTES = 4096
_FINISHED = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x9c)|[ -/]*(?![\[\]PX^_])[0-~])"
)


def _unfinished(data: bytes) -> int:
    """How many bytes at the end of `data` start a control sequence or a UTF-8 character
    that the next output may finish."""
    escape = data.rfind(b"\x1b")
    if escape >= 0 and _FINISHED.match(data, escape) is None:
        return len(data) - escape
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # not a continuation byte: the character's first
            needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
            return back if byte >= 0xC0 and needed > back else 0
    return 0


def _exit_code(report: bytes, *, ended: bool) -> int | None:
    """The exit code in a call supervisor's report (negative: a signal); None until known."""
    for line in report.split(b"\n")[:-1]:
        word, _, number = line.decode(errors="replace").partition(" ")
        if word == "exit":
            return int(number)
        if word == "signal":
            return -int(number)
    if ended:  # the call supervisor died without a report (kill -9)
        logger.warning("the exec call supervisor of a session ended without reporting")
        return -signal.SIGKILL
    return None


def _wake(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
    """Resolve `future` from any thread (once)."""

    def done() -> None:
        if not future.done():
            future.set_result(None)

    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
        loop.call_soon_threadsafe(done)
