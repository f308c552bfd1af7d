"""Who owns a running call of a SQLite journal: a byte of a side file, locked while the
journal is open.

Each open journal holds an open-file-description lock (Linux ``F_OFD_SETLK``, POSIX locks
elsewhere) on a random byte of ``<name>-owners`` and writes that number in the rows of the
calls it runs. The kernel drops the lock when the process dies, so a running call whose
owner's byte is free was interrupted. Session run locks are bytes of the same file.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import struct
import weakref
from pathlib import Path

from toolbridge.journal.records import CallKey, session_lock_number

__all__ = ["Owner"]


class Owner:
    """This journal's identity in running rows: a byte of the side file it keeps locked, and
    the calls it runs now (`held`, touched only by the batch being written, under
    `SQLiteJournal._writing`).

    Opened without `create` and no side file there, it is a reader's: no journal ever
    opened the file, so no owner is alive, and it owns nothing (fd -1, number 0). A
    `reader` (of a journal in a folder it cannot write) opens it read-only and owns nothing.
    """

    def __init__(
        self, path: Path, *, create: bool = True, follow_links: bool = True, reader: bool = False
    ) -> None:
        flags = (os.O_RDONLY if reader else os.O_RDWR) | os.O_CLOEXEC
        flags |= os.O_CREAT if create else 0
        self.number = 0
        self.held: set[CallKey] = set()
        self._path, self._flags = path, flags | (0 if follow_links else os.O_NOFOLLOW)
        try:
            self.fd = os.open(path, self._flags, 0o600)
        except FileNotFoundError:
            if create:
                raise
            self.fd = -1
            return
        if reader:  # it only tests others' locks (a read-only file takes none)
            _OPEN_OWNERS.add(self)
            return
        while True:
            self.number = secrets.randbits(62) + 1
            if _lock(self.fd, self.number, fcntl.F_WRLCK):
                break
        _OPEN_OWNERS.add(self)

    def elsewhere(self, number: int | None) -> bool:
        """Whether another open journal owns the calls whose owner is `number` (this one's
        own calls are in `held`)."""
        if number is None or number == self.number:
            return False
        if self.fd < 0:  # a reader's: the side file may have come since (a writer opened)
            try:
                self.fd = os.open(self._path, self._flags)
            except OSError:  # still none (or not one to open): no owner can be proven alive
                return False
            _OPEN_OWNERS.add(self)  # a forked child closes its copy, as of any owner's
        return _locked_by_another(self.fd, number)

    def lock_session(self, session: str) -> bool:
        """Take the run lock of `session` (a byte of the side file past every owner number);
        False when another journal holds it."""
        return _lock(self.fd, _SESSION_LOCKS + session_lock_number(session), fcntl.F_WRLCK)

    def unlock_session(self, session: str) -> None:
        if self.fd >= 0:
            _lock(self.fd, _SESSION_LOCKS + session_lock_number(session), fcntl.F_UNLCK)

    def close(self) -> None:
        self.held.clear()
        _OPEN_OWNERS.discard(self)
        if self.fd >= 0:
            os.close(self.fd)  # the kernel drops the lock: calls still owned are interrupted
            self.fd = -1


# Owners open in this process. A child forked without exec (a tool's multiprocessing
# worker) inherits their descriptors, and with them the open file description an OFD lock
# belongs to: the lock would outlive this process for as long as the child lives, and its
# calls would look busy instead of interrupted. The child closes its copies (the parent's
# lock stays: it goes with the last descriptor).
_OPEN_OWNERS: weakref.WeakSet[Owner] = weakref.WeakSet()


def _forget_owners_in_child() -> None:
    for owner in list(_OPEN_OWNERS):
        owner.close()


os.register_at_fork(after_in_child=_forget_owners_in_child)


_SESSION_LOCKS = (1 << 62) + 2  # session lock bytes start past every owner number (1 .. 2**62)
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
_FLOCK = "@hhqqi4x"  # struct flock: type, whence, start, len, pid


def _lock(fd: int, offset: int, kind: int) -> bool:
    command = _OFD_SETLK if _OFD_SETLK is not None else fcntl.F_SETLK
    try:
        fcntl.fcntl(fd, command, struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0))
    except OSError:
        return False
    return True


def _locked_by_another(fd: int, offset: int) -> bool:
    command = _OFD_GETLK if _OFD_GETLK is not None else fcntl.F_GETLK
    probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    kind = struct.unpack(_FLOCK, fcntl.fcntl(fd, command, probe))[0]
    return bool(kind != fcntl.F_UNLCK)
