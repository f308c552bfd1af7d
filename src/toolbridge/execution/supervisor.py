"""The exec supervisor: the processes between toolbridge and every command it runs.

Started as ``python -I -S supervisor.py`` (standard library only) with stdin a Unix
socket to toolbridge, it is a *server*: it waits for requests and forks one *call
supervisor* per command, so a call costs a fork, not an interpreter start. A request
is an 8-byte big-endian length, with two or three file descriptors attached (the
command's output pipe, the call's channel, a socket, and optionally the read end of the
command's stdin), then that many bytes of JSON:
``{"argv": [...], "cwd": "...", "env": {...}, "home": "..."}``. End-of-file on stdin ends
the server. The server runs either as a plain process or inside a long-lived bubblewrap
sandbox (one per context session), where every command of that session starts.

A call supervisor

- is a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): every orphaned descendant
  of the command, including one that called ``setsid`` or double-forked, is
  re-parented to it instead of to init;
- makes the command's scratch HOME (``home``, a new directory: a path that exists fails
  the call), and removes it once the call has ended;
- starts the command in a session of its own, stdin ``/dev/null`` (or the pipe sent
  with the request), stdout and stderr the output pipe: ``kill 0`` from the command
  reaches only the command's group, ``kill $PPID`` reaches the call supervisor, and
  neither reaches toolbridge;
- writes ``pid <its pid>`` to the channel, then waits until the command exits, or the
  channel reaches end-of-file (toolbridge stopped the call, or died), or it gets
  SIGTERM/SIGINT/SIGHUP/SIGQUIT; then it kills the command's group and every descendant
  it can find, reaps them all, writes ``exit <code>`` or ``signal <number>`` to the
  channel and exits.

The server is a subreaper too: if a call supervisor is killed (``kill -9 $PPID``), the
command's descendants land on the server, which kills them.
"""

# The C half of `signal`: the same functions and constants without building the enums,
# which would be a third of this process's start-up.
import _signal as signal  # type: ignore[import-not-found]
import ctypes
import json
import os
import select
import shutil
import socket

PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
HEADER_BYTES = 8

_libc = ctypes.CDLL(None, use_errno=True)


def _become_subreaper() -> None:
    prctl = getattr(_libc, "prctl", None)
    if prctl is None:  # not Linux: no subreapers; only the command's group is killed
        return
    if prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        error = os.strerror(ctypes.get_errno())
        os.write(2, f"exec supervisor: cannot become a child subreaper: {error}\n".encode())
        os._exit(126)


def _wakeup(signals: tuple[int, ...]) -> int:
    """Deliver `signals` as bytes on a pipe that `poll` can watch; returns its read end."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for number in signals:
        signal.signal(number, lambda *_: None)
    return wake_read


def _children() -> list[int]:
    """The pids of this process's children (live or not yet reaped)."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as listing:
            return [int(child) for child in listing.read().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process
        found: list[int] = []
        if not os.path.isdir("/proc"):  # not Linux
            return found
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as stat:
                        fields = stat.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == pid:
                    found.append(int(name))
        return found


def _kill(pid: int, *, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone (contextlib would cost start-up time)
        return


def _reap() -> list[tuple[int, int]]:
    """Reap every child that has ended, without waiting: (pid, wait status) pairs."""
    ended: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


# --- the call supervisor -------------------------------------------------------------


def _start(argv: list[str], cwd: str, env: dict[str, str]) -> int:
    """Spawn the command in a new session, in `cwd`, with stdin /dev/null (this fd 0).

    ``posix_spawn`` (vfork and exec), not ``fork``: a call costs one copy of this
    process, not two. Signals this process handles or ignores are set to default.
    """
    try:
        os.chdir(cwd)
        return os.posix_spawnp(
            argv[0],
            argv,
            env,
            setsid=True,
            setsigdef=(*STOP_SIGNALS, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError as exc:
        os.write(2, f"exec: cannot run {argv[0]!r} in {cwd!r}: {exc.strerror}\n".encode())
        return 0


def _kill_descendants(command: int) -> None:
    """SIGKILL the command's group and every descendant, and reap them all.

    Killing a child re-parents its own children to this subreaper, so the loop goes on
    until no child is left at all.
    """
    _kill(command, group=True)
    while True:
        for child in _children():
            _kill(child)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def supervise(argv: list[str], cwd: str, env: dict[str, str], channel: int, home: str) -> None:
    """Run one command to its end and everything it started with it; report; exit."""
    _become_subreaper()
    wake = _wakeup((*STOP_SIGNALS, signal.SIGCHLD))
    if home:
        try:  # a new directory, never one that was there (a link planted in a shared /tmp)
            _make_home(home)
        except OSError as exc:
            os.write(2, f"exec: cannot make the scratch HOME {home!r}: {exc.strerror}\n".encode())
            os.write(channel, f"pid {os.getpid()}\n".encode())
            _report(channel, "exit 126")
    command = _start(argv, cwd, env)
    # toolbridge may be gone already (killed while the request waited): then stop at once,
    # rather than die on the write and leave the command to init.
    heard = _tell(channel, f"pid {os.getpid()}")
    if not command:
        _report(channel, "exit 127")
    poller = select.poll()
    poller.register(wake, select.POLLIN)
    if heard:
        poller.register(channel, select.POLLIN)
    else:
        _kill(command, group=True)
        _kill(command)
    status: int | None = None
    while status is None:
        stop = False
        for fd, _ in poller.poll():
            if fd == channel:
                if not os.read(channel, 4096):  # end-of-file: toolbridge stopped or died
                    poller.unregister(channel)
                    stop = True
            elif any(number in STOP_SIGNALS for number in os.read(wake, 4096)):
                stop = True
        if stop:
            _kill(command, group=True)
            _kill(command)
        for pid, wait_status in _reap():  # the command, or an orphan handed to us
            if pid == command:
                status = wait_status
    _kill_descendants(command)
    if home:
        shutil.rmtree(home, ignore_errors=True)
    for fd in (0, 1, 2):  # the output pipe ends here, before this process does: a caller
        os.close(fd)  # waiting for its end-of-file does not wait for this exit too
    if os.WIFSIGNALED(status):
        _report(channel, f"signal {os.WTERMSIG(status)}")
    _report(channel, f"exit {os.waitstatus_to_exitcode(status)}")


def _make_home(home: str) -> None:
    """Make `home`, a new directory; its parent first, when an earlier command of the
    session replaced it (with a link or a file) or removed it: else no call of the
    session could start again. A real directory is left as it is (the host's /tmp)."""
    parent = os.path.dirname(home)
    if os.path.islink(parent) or not os.path.isdir(parent):
        if os.path.lexists(parent):
            os.unlink(parent)
        os.mkdir(parent, 0o755)
    os.mkdir(home, 0o700)


def _tell(channel: int, line: str) -> bool:
    """Write a line to toolbridge; False when it is gone (the channel is closed)."""
    try:
        os.write(channel, f"{line}\n".encode())
    except OSError:
        return False
    return True


def _report(channel: int, line: str) -> None:
    """Tell toolbridge how the command ended, and exit."""
    try:
        os.write(channel, f"{line}\n".encode())
    finally:  # also when toolbridge is gone and nobody is left to tell
        os._exit(0)


# --- the server ------------------------------------------------------------------------


def _receive(server: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """The next request and its two file descriptors; None at end-of-file."""
    header, fds, _, _ = socket.recv_fds(server, HEADER_BYTES, 3)
    if not header:
        return None
    while len(header) < HEADER_BYTES:
        more = server.recv(HEADER_BYTES - len(header))
        if not more:
            return None
        header += more
    size = int.from_bytes(header, "big")
    payload = bytearray()
    while len(payload) < size:
        chunk = server.recv(min(size - len(payload), 1 << 20))
        if not chunk:
            return None
        payload += chunk
    return json.loads(payload), fds


def _run_call(server: socket.socket, wake: int, request: dict[str, object], fds: list[int]) -> int:
    """Fork the call supervisor for `request`; returns its pid."""
    output, channel = fds[0], fds[1]
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    try:
        os.set_inheritable(channel, False)  # the command must not hold the channel open
        server.close()
        os.close(wake)
        signal.set_wakeup_fd(-1)
        stdin = fds[2] if len(fds) == 3 else os.open(os.devnull, os.O_RDONLY)
        # Out of the way of 0-2 first: a received fd may itself be 0, 1 or 2.
        stdin, output = os.dup(stdin), os.dup(output)
        os.dup2(stdin, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        for fd in {stdin, output, *fds} - {0, 1, 2, channel}:
            os.close(fd)
        for fd in (0, 1, 2):  # os.open makes fds close-on-exec; the command needs these
            os.set_inheritable(fd, True)
        argv, cwd, env = request["argv"], request["cwd"], request["env"]
        home = request.get("home") or ""
        assert isinstance(argv, list) and isinstance(cwd, str) and isinstance(env, dict)
        assert isinstance(home, str)
        supervise(argv, cwd, env, channel, home)
    finally:
        os._exit(125)


def _kill_strays(calls: set[int]) -> bool:
    """Reap what ended, kill every child that is not a running call supervisor (the
    descendants of one killed on purpose); True if there were any."""
    for pid, _ in _reap():
        calls.discard(pid)
    strays = set(_children()) - calls
    for stray in strays:
        _kill(stray)  # its own children come back here as it dies
    return bool(strays)


def _sweep(wake: int, calls: set[int]) -> None:
    """Before the server ends: kill its strays until none is left. They come back one
    level at a time (each as its parent dies); a server that left at once let the rest
    live on."""
    for _ in range(100):  # at most about 10 s: a stray that SIGKILL does not end is stuck
        if not _kill_strays(calls):
            break
        if select.select([wake], [], [], 0.1)[0]:  # a child ended, or 0.1 s passed
            os.read(wake, 4096)


def serve() -> None:
    """Fork a call supervisor per request until end-of-file; kill strays handed to us."""
    _become_subreaper()
    for number in STOP_SIGNALS:  # a command that signals its supervisor's group
        signal.signal(number, signal.SIG_IGN)  # stops its own call, not the server
    server = socket.socket(fileno=0)
    wake = _wakeup((signal.SIGCHLD,))
    poller = select.poll()
    poller.register(wake, select.POLLIN)
    poller.register(server.fileno(), select.POLLIN)
    calls: set[int] = set()
    while True:
        for fd, _ in poller.poll():
            if fd == wake:
                os.read(wake, 4096)
                continue
            received = _receive(server)
            if received is None:  # toolbridge closed the tool, or died
                _sweep(wake, calls)
                os._exit(0)
            request, fds = received
            if len(fds) in (2, 3):
                calls.add(_run_call(server, wake, request, fds))
            else:  # not a request toolbridge sends: drop it
                for extra in fds:
                    os.close(extra)
        _kill_strays(calls)  # descendants of a call supervisor killed on purpose


if __name__ == "__main__":
    serve()
