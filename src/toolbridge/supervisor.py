"""The exec supervisor: a small process between toolbridge and a command run without a sandbox.

Run as ``python -I -S supervisor.py ARGV...`` (standard library only, started once per
call) with stdin a pipe that toolbridge holds open for as long as the command may run,
and stdout/stderr the command's output pipe. It

- makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``), so every orphaned
  descendant of the command, including one that called ``setsid`` or double-forked, is
  re-parented to it instead of to init;
- starts the command in a session of its own, stdin ``/dev/null``, with ``SIGKILL`` as
  its parent-death signal: ``kill 0`` from the command reaches only the command's group,
  and ``kill $PPID`` reaches this process, never toolbridge;
- waits until the command exits, or its stdin reaches end-of-file (toolbridge stopped
  the call, or died), or it gets SIGTERM/SIGINT/SIGHUP/SIGQUIT; then it kills the
  command's group and every descendant it can find, reaps them all, and exits with the
  command's status (a command killed by signal N ends the supervisor by signal N).
"""

# The C half of `signal`: same functions and constants, without building the enums,
# which would be a third of this process's start-up. The supervisor starts on every call.
import _signal as signal  # type: ignore[import-not-found]
import ctypes
import os
import select
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _children() -> list[int]:
    """The pids of this process's children (live or not yet reaped)."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as listing:
            return [int(child) for child in listing.read().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process
        found = []
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


def _start(argv: list[str], libc: ctypes.CDLL) -> int:
    """Fork and exec the command in a new session with stdin /dev/null."""
    parent = os.getpid()
    child = os.fork()
    if child:
        return child
    try:
        signal.set_wakeup_fd(-1)
        os.setsid()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the supervisor died before the death signal was set
            os._exit(137)
        for number in (*STOP_SIGNALS, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"exec: cannot run {argv[0]!r}: {exc.strerror}\n".encode())
    finally:
        os._exit(127)


def _end_like(status: int) -> None:
    """Exit the way the command did: with its exit code, or by the signal that killed it."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the workspace
        signal.set_wakeup_fd(-1)
        if number != signal.SIGKILL:
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)  # the signal did not end this process
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    if not argv:
        os.write(2, b"supervisor: no command given\n")
        os._exit(2)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        error = os.strerror(ctypes.get_errno())
        os.write(2, f"exec supervisor: cannot become a child subreaper: {error}\n".encode())
        os._exit(126)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for number in (*STOP_SIGNALS, signal.SIGCHLD):
        signal.signal(number, lambda *_: None)
    command = _start(argv, libc)
    poller = select.poll()
    poller.register(wake_read, select.POLLIN)
    poller.register(0, select.POLLIN)
    status: int | None = None
    while status is None:
        stop = False
        for fd, _ in poller.poll():
            if fd == 0:
                if not os.read(0, 4096):  # end-of-file: toolbridge stopped the call or died
                    poller.unregister(0)
                    stop = True
            elif any(n in STOP_SIGNALS for n in os.read(wake_read, 4096)):
                stop = True
        if stop:
            _kill(command, group=True)
            _kill(command)
        while True:  # reap whatever ended: the command, or an orphan handed to us
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid == command:
                status = wait_status
    _kill_descendants(command)
    _end_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
