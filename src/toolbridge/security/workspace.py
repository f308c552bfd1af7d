"""The workspace guard: decide whether a path is inside the workspace, and open it safely.

`Workspace.resolve` resolves a model-supplied path the way the kernel would (symlinks
followed one component at a time, ``..`` applied to the real directory), then checks
that the result lies inside the root by whole components. The open helpers do not
trust that answer: they walk again from a directory fd of the root with
``O_NOFOLLOW`` on every component, so a directory swapped for a symlink between the
check and the open is refused instead of followed.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import stat
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from toolbridge.core.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.security import names
from toolbridge.security.control import CONTROL_DIR, ControlFolderViolation

__all__ = ["EntryKind", "InvalidPath", "WalkEntry", "Workspace"]

logger = logging.getLogger(__name__)

MAX_SYMLINK_HOPS = 40  # Linux MAXSYMLINKS: past this the kernel says ELOOP
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4095

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SURROGATE = re.compile("[\ud800-\udfff]")

EntryKind = Literal["file", "dir", "symlink", "other"]


class InvalidPath(ToolExecutionError):
    """A path that is wrong wherever the workspace is: empty, a NUL byte, too long, not
    valid Unicode, or naming a FIFO, socket or device instead of a regular file.

    Not a `WorkspaceViolation`: the model can fix the argument and try again. The file
    tools report it as an ``invalid_arguments`` error (see `toolbridge.tools._fs.WorkspaceTool`).
    """


@dataclass(frozen=True, slots=True)
class WalkEntry:
    """One entry met by `Workspace.walk`: its real path, kind, size and depth (1 = child).

    `error` is set on a directory the walk meant to enter but could not list (for
    example "permission denied"): its contents are unknown, not empty.
    """

    path: Path
    kind: EntryKind
    size: int
    depth: int
    error: str | None = None


def _kind(mode: int) -> EntryKind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _describe_mode(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


class Workspace:
    """A directory the tools may touch, and the only way they reach files in it.

    The root is resolved once, when the workspace is made; its device and inode are
    remembered so that a root replaced later is noticed instead of trusted.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        configured = Path(os.path.abspath(os.fspath(root)))
        real = Path(os.path.realpath(configured))
        try:
            info = os.stat(real)
        except OSError as exc:
            raise ValueError(f"workspace {root!s} cannot be used: {exc.strerror}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise ValueError(f"workspace {root!s} is not a directory")
        self.root = real
        self._root_text = str(real).rstrip("/")
        self._root_shown = names.shown(str(real))  # in messages: no lone surrogate
        # The root as configured, when it differs from the real path (a symlink on the
        # way, as macOS /tmp -> /private/tmp): absolute paths under it are accepted too.
        self.configured = configured
        self._alias = configured.parts[1:] if configured != real else None
        self._identity = (info.st_dev, info.st_ino)
        # toolbridge's own folder (journal, session locks, skills): never the tools'.
        self.control = real / CONTROL_DIR
        self._control_text = str(self.control)
        self._control_prefix = self._control_text + "/"

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    # --- deciding ------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The real absolute path `path` names, if it is inside the workspace.

        Relative paths start at the root; a leading ``~`` is expanded; nothing else
        (``$VAR``, ``%2e``, look-alike dots) is interpreted. A missing tail is allowed
        (for new files) as long as its deepest existing ancestor resolves inside.
        toolbridge's own folder (``.toolbridge/`` at the root) and everything in it is
        refused however it is spelled or linked to (`ControlFolderViolation`).

        A path that does not exist as written and holds ``\\xNN`` escapes of bytes 0x80
        to 0xFF names those bytes (`names.from_escapes`): how the tools show a name
        that is not UTF-8, so the name a model was shown opens the same file (an
        absolute path under the root's own path, as the messages show it, too). The
        path so made is resolved and checked as any other.
        """
        return self._read(path)[1]

    def last_part(self, path: str) -> tuple[Path, str]:
        """The real directory that `path`'s last component is in, and that component
        as the file system names it (``\\xNN`` escapes read as `resolve` reads them),
        not followed: for a caller that must see a symlink there as the link."""
        spelled = self._read(path)[0]
        head, _, name = spelled.rstrip("/").rpartition("/")
        return self._resolve_checked(path, head or ("/" if spelled.startswith("/") else ".")), name

    def _read(self, path: str) -> tuple[str, Path]:
        """`path` as `resolve` reads it (as written, or with its escapes as bytes when it
        names no file as written), and the real path it names."""
        self._check_spelling(path)
        with_bytes = names.from_escapes(path)
        if with_bytes is None:
            return path, self._resolve_checked(path, path)
        as_written, shown = path, self._root_shown
        if shown != str(self.root) and path.startswith(shown) and path[len(shown) :][:1] in "/":
            # under the root's own path as the messages show it (/srv/caf\\xe9/ws): the root
            rest = path[len(shown) :]
            as_written = self._root_text + rest
            with_bytes = self._root_text + (names.from_escapes(rest) or rest)
        try:
            real = self._resolve_checked(path, as_written)
        except ToolExecutionError:  # no path as written ('..' out of a name not there)
            return with_bytes, self._resolve_checked(path, with_bytes)
        if os.path.lexists(real):
            return as_written, real
        return with_bytes, self._resolve_checked(path, with_bytes)

    def _resolve_checked(self, original: str, path: str) -> Path:
        """`resolve` of `path`, whose spelling is checked (`original` is named in errors)."""
        expanded = os.path.expanduser(path) if path.startswith("~") else path
        real = self._follow(original, self._respell(expanded))
        if not self.contains(real):
            raise WorkspaceViolation(
                f"{_show(original)} is outside the workspace ({self._root_shown})", target=original
            )
        self._refuse_control(real, original)
        return real

    def is_control(self, real: Path) -> bool:
        """Whether the real path `real` is toolbridge's own folder or inside it."""
        return real == self.control or real.is_relative_to(self.control)

    def _refuse_control(self, real: Path, original: str) -> None:
        if self.is_control(real):
            raise ControlFolderViolation(
                f"{_show(original)} is in {CONTROL_DIR}, toolbridge's own folder (its "
                "journal, session locks and skills); the model's tools cannot read, list or "
                "change it",
                target=original,
            )

    def contains(self, real: Path) -> bool:
        """Whether the real path `real` is the root or below it, by whole components."""
        return real == self.root or real.is_relative_to(self.root)

    def relative(self, real: Path) -> str:
        """`real` as the model should see it: relative to the root, ``.`` for the root."""
        text, root = str(real), self._root_text
        if text.startswith(root) and text[len(root) : len(root) + 1] == "/":
            return text[len(root) + 1 :]  # the common case, without pathlib's parsing
        return real.relative_to(self.root).as_posix() or "."

    def _check_spelling(self, path: str) -> None:
        """Refuse what no file system holds. Backslashes and drive letters are ordinary
        name characters on POSIX (``\\\\server\\x`` is one file name), so they pass."""
        if not path:
            raise InvalidPath(
                "the path is empty", hint="Use '.' for the workspace root, or a relative path."
            )
        if "\x00" in path:
            raise InvalidPath(
                f"{_show(path)} contains a NUL byte, which no file name can hold",
                hint="Remove the NUL byte (\\u0000) from the path.",
            )
        surrogate = _SURROGATE.search(path)
        if surrogate:
            raise InvalidPath(
                f"{path[:200]!r} contains a lone surrogate (U+{ord(surrogate.group()):04X}), "
                "which is not valid Unicode",
                hint="Send the path as valid Unicode text.",
            )
        if len(path.encode()) > MAX_PATH_BYTES:
            raise InvalidPath(
                f"the path is {len(path.encode())} bytes long; paths are at most "
                f"{MAX_PATH_BYTES} bytes",
                hint="Use a shorter path.",
            )
        for part in path.split("/"):
            if len(part.encode()) > MAX_NAME_BYTES:
                raise InvalidPath(
                    f"the path component {_show(part)} is {len(part.encode())} bytes long; "
                    f"file names are at most {MAX_NAME_BYTES} bytes",
                    hint="Use a shorter file name.",
                )

    def _respell(self, path: str) -> str:
        """An absolute path spelled under the configured root, re-spelled under the real
        root (``/tmp/ws/x`` -> ``/private/tmp/ws/x``); any other path as it is.

        Only the leading components are compared, as written: ``..`` after them is
        still applied to the real directory by `_follow`, as the kernel would.
        """
        alias = self._alias
        if alias is None or not path.startswith("/"):
            return path
        parts = path.split("/")
        matched = 0
        for index, part in enumerate(parts):
            if matched == len(alias):
                return "/".join([str(self.root), *parts[index:]])
            if part in ("", "."):
                continue
            if part != alias[matched]:
                return path
            matched += 1
        return str(self.root) if matched == len(alias) else path

    def _follow(self, original: str, path: str) -> Path:
        """Resolve `path` component by component, as the kernel's path walk does."""
        current = "/" if path.startswith("/") else str(self.root)
        pending = deque(path.split("/"))
        missing: str | None = None  # the first component that does not exist
        is_dir = True
        hops = 0
        while pending:
            part = pending.popleft()
            if part in ("", ".") and is_dir:
                continue
            if missing is not None and part == "..":
                raise self._problem(
                    original,
                    current,
                    f"{_show(original)} goes up ('..') out of {_show(missing)}, which does "
                    "not exist",
                    "Use a path without '..', relative to the workspace root.",
                )
            if not is_dir:
                raise self._problem(
                    original,
                    current,
                    f"{_show(original)}: {_show(self._shown(current))} is a file, not a directory",
                    "Check the path with list_dir.",
                )
            if part == "..":
                current = os.path.dirname(current)
                continue
            candidate = os.path.join(current, part)
            if candidate == self._control_text or candidate.startswith(self._control_prefix):
                # Not even looked at: what exists in toolbridge's folder is not the model's.
                self._refuse_control(Path(candidate), original)
            if missing is not None:
                current = candidate
                continue
            if not self._on_the_way(candidate):
                # Never look at what exists off the way to the root: which error came
                # back would tell the model. Leaving that line is a violation at once.
                raise self._problem(original, candidate, "", "")
            try:
                info = os.lstat(candidate)
            except FileNotFoundError:
                missing, current = part, candidate
                continue
            except OSError as exc:
                raise self._problem(
                    original,
                    candidate,
                    f"{_show(original)} cannot be resolved: {exc.strerror}",
                    "Check the path with list_dir.",
                ) from None
            if stat.S_ISLNK(info.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise self._problem(
                        original,
                        candidate,
                        f"{_show(original)} runs into a symlink loop (more than "
                        f"{MAX_SYMLINK_HOPS} links followed)",
                        "The symlink points back at itself; use another path.",
                    )
                try:
                    target = os.readlink(candidate)
                except OSError as exc:  # the link changed since lstat
                    raise self._problem(
                        original,
                        candidate,
                        f"{_show(original)} changed while it was being resolved: {exc.strerror}",
                        "Try again once the files stop changing.",
                    ) from None
                if target.startswith("/"):
                    target, current = self._respell(target), "/"
                pending.extendleft(reversed(target.split("/")))
                continue
            current, is_dir = candidate, stat.S_ISDIR(info.st_mode)
        return Path(current)

    def _on_the_way(self, path: str) -> bool:
        """Inside the workspace, or one of the root's own ancestors."""
        root = str(self.root)
        return path == root or path.startswith(root + "/") or root.startswith(path + "/")

    def _problem(self, original: str, where: str, message: str, hint: str) -> Exception:
        # Outside the workspace every failure is the same violation, so that probing
        # paths out there tells the model nothing about what exists or is readable.
        if not self.contains(Path(where)):
            return WorkspaceViolation(
                f"{_show(original)} is outside the workspace ({self._root_shown})", target=original
            )
        return ToolExecutionError(message, hint=hint)

    def _shown(self, real: str) -> str:
        path = Path(real)
        return self.relative(path) if self.contains(path) else real

    # --- opening -------------------------------------------------------------------

    def open_read(self, real: Path) -> BinaryIO:
        """Open the regular file at the resolved path `real` for reading, race-safely.

        FIFOs, sockets and devices are refused without blocking (the open is
        non-blocking and the type is checked on the open descriptor).
        """
        parent, name = self._open_parent(real, create=False)
        try:
            if name is None:
                raise _is_a_directory(self.relative(real))
            return self._open_file_at(parent, name, real)
        finally:
            os.close(parent)

    def read_files(
        self, reals: Iterable[Path], max_bytes: int
    ) -> Generator[tuple[Path, bytes | ToolExecutionError | WorkspaceViolation], None, None]:
        """The first `max_bytes` + 1 bytes of each resolved file, or why it cannot be read.

        As safe as `open_read` for each file, and faster on many files: a directory fd
        reached by the no-follow walk is kept while consecutive files share it.
        """
        parent_path: Path | None = None
        parent = -1
        try:
            for real in reals:
                try:
                    if real.parent != parent_path:
                        if parent >= 0:
                            os.close(parent)
                            parent, parent_path = -1, None
                        if real == self.root:
                            raise _is_a_directory(".")
                        parent, _ = self._open_parent(real, create=False)
                        parent_path = real.parent
                    with self._open_file_at(parent, real.name, real) as file:
                        yield real, file.read(max_bytes + 1)
                except (ToolExecutionError, WorkspaceViolation) as exc:
                    yield real, exc
        finally:
            if parent >= 0:
                os.close(parent)

    def _open_file_at(self, parent: int, name: str, real: Path) -> BinaryIO:
        """Open the regular file `name` in the directory fd `parent` (no-follow, checked)."""
        fd = self._open_at(parent, name, _READ_FLAGS, real)
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise _is_a_directory(self.relative(real))
            if not stat.S_ISREG(mode):
                raise _not_regular(self.relative(real), mode)
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    @contextmanager
    def open_dir(self, real: Path) -> Iterator[int]:
        """A directory fd for the resolved directory `real`, reached without following links."""
        parent, name = self._open_parent(real, create=False)
        if name is None:
            fd = parent
        else:
            try:
                fd = self._open_at(parent, name, _DIR_FLAGS, real)
            finally:
                os.close(parent)
        try:
            yield fd
        finally:
            os.close(fd)

    def write_atomic(self, real: Path, data: bytes) -> bool:
        """Replace (or create) the file at `real` with `data` atomically; True if created.

        Missing parent directories are made inside the workspace. The data goes to a
        temporary file in the same directory, is fsynced, and renamed over the target,
        so readers see the old or the new content, never a mix. An existing file's
        permission bits are kept.
        """
        parent, name = self._open_parent(real, create=True)
        shown = self.relative(real)
        try:
            if name is None:
                raise _is_a_directory(shown)
            return _replace_at(parent, name, shown, data)
        except IsADirectoryError:
            raise _is_a_directory(shown) from None
        except OSError as exc:
            raise ToolExecutionError(
                f"{shown} could not be written: {exc.strerror}",
                hint="Check that its directory still exists and is writable, then try again.",
            ) from None
        finally:
            os.close(parent)

    def walk(
        self,
        real: Path,
        *,
        max_depth: int,
        skip_dirs: frozenset[str] = frozenset(),
        leave_out: Callable[[Path, EntryKind], bool] | None = None,
    ) -> Generator[WalkEntry, None, None]:
        """Entries below the resolved directory `real`, depth first, sorted by name.

        Symlinks are reported but never followed, so a walk cannot leave the workspace
        and ends on symlink loops. Directories named in `skip_dirs` are reported but not
        entered; entries for which `leave_out(path, kind)` is true are neither reported
        nor entered (how searches honour ``.gitignore``). A directory that cannot be
        opened or listed is reported with `error` set, and the walk goes on; only `real`
        itself failing is an error.
        """
        with self.open_dir(real) as fd:
            try:
                entries = _scan(fd)
            except OSError as exc:
                raise ToolExecutionError(
                    f"{self.relative(real)} cannot be listed: {_reason(exc)}",
                    hint="List another directory.",
                ) from None
            yield from self._walk_entries(
                fd, entries, real, 1, max_depth=max_depth, skip_dirs=skip_dirs, leave_out=leave_out
            )

    def _walk_entries(
        self,
        fd: int,
        entries: list[os.DirEntry[str]],
        real: Path,
        depth: int,
        *,
        max_depth: int,
        skip_dirs: frozenset[str],
        leave_out: Callable[[Path, EntryKind], bool] | None,
    ) -> Iterator[WalkEntry]:
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:  # gone since it was listed
                continue
            kind = _kind(info.st_mode)
            path = real / entry.name
            if entry.name == CONTROL_DIR and path == self.control:
                continue  # toolbridge's own folder is not listed (nor entered)
            if leave_out is not None and leave_out(path, kind):
                continue
            size = info.st_size if kind == "file" else 0
            if kind != "dir" or depth >= max_depth or entry.name in skip_dirs:
                yield WalkEntry(path, kind, size, depth)
                continue
            # Open and list the directory before reporting it, so that a failure is
            # reported on its own entry instead of looking like an empty directory.
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:  # unreadable, or replaced by a symlink meanwhile
                yield WalkEntry(path, kind, size, depth, _reason(exc))
                continue
            try:
                try:
                    below = _scan(child)
                except OSError as exc:
                    yield WalkEntry(path, kind, size, depth, _reason(exc))
                    continue
                yield WalkEntry(path, kind, size, depth)
                yield from self._walk_entries(
                    child,
                    below,
                    path,
                    depth + 1,
                    max_depth=max_depth,
                    skip_dirs=skip_dirs,
                    leave_out=leave_out,
                )
            finally:
                os.close(child)

    def _open_root(self) -> int:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != self._identity:
            os.close(fd)
            raise WorkspaceViolation(
                f"the workspace directory {self._root_shown} was replaced after it was opened",
                target=self._root_shown,
            )
        return fd

    def _open_parent(self, real: Path, *, create: bool) -> tuple[int, str | None]:
        """A directory fd of `real`'s parent, walked from the root with no-follow.

        Returns the root fd and None when `real` is the root itself.
        """
        if not self.contains(real):
            raise WorkspaceViolation(
                f"{names.shown(str(real))} is outside the workspace ({self._root_shown})",
                target=names.shown(str(real)),
            )
        self._refuse_control(real, self.relative(real))
        parts = real.relative_to(self.root).parts
        fd = self._open_root()
        if not parts:
            return fd, None
        try:
            for index, part in enumerate(parts[:-1]):
                below = self.root.joinpath(*parts[: index + 1])
                if create:
                    _make_directory(fd, part, self.relative(below))
                next_fd = self._open_at(fd, part, _DIR_FLAGS, below)
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def _open_at(self, dir_fd: int, name: str, flags: int, real: Path) -> int:
        shown = self.relative(real)
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            raise ToolExecutionError(
                f"{shown} does not exist",
                hint="Check the path with list_dir or glob; paths are relative to the "
                "workspace root.",
            ) from None
        except OSError as exc:
            # O_NOFOLLOW meets a symlink: ELOOP, or ENOTDIR when O_DIRECTORY is also set.
            if exc.errno == errno.ELOOP or (
                exc.errno == errno.ENOTDIR and _is_symlink_at(dir_fd, name)
            ):
                raise _changed(shown) from None
            if exc.errno == errno.ENOTDIR:
                raise ToolExecutionError(
                    f"{shown}: a part of the path is not a directory",
                    hint="Check the path with list_dir.",
                ) from None
            if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing
                raise InvalidPath(
                    f"{shown} is not a regular file; only regular files can be opened",
                    hint=_NOT_REGULAR_HINT,
                ) from None
            raise ToolExecutionError(
                f"{shown} cannot be opened: {exc.strerror}", hint="Try another path."
            ) from None


def _scan(fd: int) -> list[os.DirEntry[str]]:
    """The entries of the open directory `fd`, sorted by name."""
    with os.scandir(fd) as scan:
        return sorted(scan, key=lambda e: e.name)


def _reason(exc: OSError) -> str:
    """Why a directory could not be opened or listed, in a few words."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.ENOENT):
        return "changed while it was being listed"
    return (exc.strerror or str(exc)).lower()


def _show(path: str, limit: int = 200) -> str:
    """`path` quoted for a message, a name that is not UTF-8 as the tools show it
    (`names.shown`: ``\\xe9``, not the ``\\udce9`` of its repr)."""
    path = names.shown(path)
    return repr(path if len(path) <= limit else path[:limit] + "…")


def _is_a_directory(shown: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"{shown} is a directory, not a file",
        hint="Use list_dir to see what it contains, then name a file inside it.",
    )


_NOT_REGULAR_HINT = "Choose a regular file; list_dir marks special files as not readable."


def _not_regular(shown: str, mode: int) -> InvalidPath:
    return InvalidPath(
        f"{shown} is {_describe_mode(mode)}; only regular files can be opened",
        hint=_NOT_REGULAR_HINT,
    )


def _changed(shown: str) -> WorkspaceViolation:
    return WorkspaceViolation(
        f"{shown} changed while it was being opened (a symlink appeared on the path); "
        "refused rather than followed",
        target=shown,
    )


def _replace_at(parent: int, name: str, shown: str, data: bytes) -> bool:
    """Write `data` to a temporary file in `parent`, fsync it, and rename it over `name`."""
    try:
        existing: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None:
        if stat.S_ISLNK(existing.st_mode):
            raise _changed(shown)
        if stat.S_ISDIR(existing.st_mode):
            raise _is_a_directory(shown)
        if not stat.S_ISREG(existing.st_mode):
            raise _not_regular(shown, existing.st_mode)
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666
    temp = f".{secrets.token_hex(8)}.toolbridge-tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, mode, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if existing is not None:
                os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        _unlink_quietly(temp, parent)
        raise
    os.fsync(parent)
    return existing is None


def _make_directory(dir_fd: int, name: str, shown: str) -> None:
    try:
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    except FileExistsError:
        return
    except OSError as exc:
        raise ToolExecutionError(
            f"the directory {shown} could not be created: {exc.strerror}",
            hint="Check that the parent directory exists and is writable.",
        ) from None


def _is_symlink_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError as exc:
        logger.warning("could not remove temporary file %s: %s", name, exc)
