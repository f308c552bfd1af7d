"""toolbridge's own folder in a workspace (``.toolbridge/``): kept from the model, opened safely.

The folder holds the call journal, the agent's session lock and the workspace's skills.
The model's tools never reach it (`toolbridge.security.workspace.Workspace` refuses it,
the exec sandbox mounts it read-only), and toolbridge itself opens what is in it
without following links: a symlink planted there (by an unsandboxed command, or before
toolbridge guarded the folder) would otherwise send the journal or the lock file
anywhere this user can write.

Call `control_folder(workspace)` for the folder and `control_file(workspace, name)` for
a path in it that another library (SQLite) opens; `open_control_file` opens one here
with ``O_NOFOLLOW``. Each refuses a link, a non-directory, or something another user
owns with `ControlFolderViolation`, one clear error naming the path and what to do.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import ClassVar

from toolbridge.core.errors import WorkspaceViolation

__all__ = [
    "CONTROL_DIR",
    "ControlFolderViolation",
    "control_file",
    "control_folder",
    "open_control_file",
]

CONTROL_DIR = ".toolbridge"
"""The name of toolbridge's own folder at a workspace's root."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ControlFolderViolation(WorkspaceViolation):
    """A path names toolbridge's own folder, or something in that folder is not as
    toolbridge made it (a symlink, another user's file, not a directory)."""

    hint: ClassVar[str] = (
        "The .toolbridge folder holds toolbridge's own state (journal, session locks, "
        "skills); the model's tools cannot read or change it. This is a hard boundary: do "
        "not try other spellings, links or commands. Work with other files, or ask the user."
    )


def control_folder(workspace: str | os.PathLike[str], *, create: bool = True) -> Path:
    """The workspace's control folder, checked to be a real directory owned by this user.

    Made (mode 0700 before the umask) when missing and `create` is true. A symlink, a
    file, or a folder another user owns in its place is a `ControlFolderViolation`.
    """
    folder = Path(workspace) / CONTROL_DIR
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ControlFolderViolation(
                f"toolbridge's folder {folder} cannot be created: {exc.strerror}",
                target=str(folder),
            ) from None
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return folder
    except OSError as exc:
        raise ControlFolderViolation(
            f"toolbridge's folder {folder} cannot be checked: {exc.strerror}",
            target=str(folder),
        ) from None
    _check(folder, info, directory=True)
    return folder


def control_file(workspace: str | os.PathLike[str], name: str) -> Path:
    """The path of `name` in the workspace's control folder (made if missing), for a
    library that opens the path itself (SQLite): the folder is a real directory and
    `name`, when it exists, is a regular file owned by this user, never a link.

    `name` is one plain file name (``journal.sqlite3``), not a path.
    """
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not a plain file name")
    path = control_folder(workspace) / name
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise ControlFolderViolation(
            f"toolbridge's file {path} cannot be checked: {exc.strerror}", target=str(path)
        ) from None
    _check(path, info, directory=False)
    return path


def open_control_file(
    workspace: str | os.PathLike[str], name: str, flags: int, mode: int = 0o600
) -> int:
    """A file descriptor of `name` in the control folder, opened with ``O_NOFOLLOW``
    relative to the folder's own descriptor (no link is followed on the way or at the
    end). `flags` are `os.open` flags (``os.O_RDWR | os.O_CREAT`` ...)."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not a plain file name")
    folder = control_folder(workspace)
    try:
        folder_fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        raise _link_or(folder, exc, "opened") from None
    try:
        _check(folder, os.fstat(folder_fd), directory=True)
        path = folder / name
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder_fd)
        except OSError as exc:
            raise _link_or(path, exc, "opened") from None
        try:
            _check(path, os.fstat(fd), directory=False)
        except BaseException:
            os.close(fd)
            raise
        return fd
    finally:
        os.close(folder_fd)


def _check(path: Path, info: os.stat_result, *, directory: bool) -> None:
    what = "folder" if directory else "file"
    if stat.S_ISLNK(info.st_mode):
        raise ControlFolderViolation(
            f"toolbridge's {what} {path} is a symbolic link; toolbridge never follows a "
            f"link in its own folder. Remove the link (rm {str(path)!r}) and run again",
            target=str(path),
        )
    expected = stat.S_ISDIR if directory else stat.S_ISREG
    if not expected(info.st_mode):
        kind = "a directory" if directory else "a regular file"
        raise ControlFolderViolation(
            f"toolbridge's {what} {path} is not {kind}; move it away and run again",
            target=str(path),
        )
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise ControlFolderViolation(
            f"toolbridge's {what} {path} belongs to another user (uid {info.st_uid}); "
            "toolbridge uses only its own. Remove it and run again",
            target=str(path),
        )


def _link_or(path: Path, exc: OSError, action: str) -> ControlFolderViolation:
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISLNK(info.st_mode):
        try:
            _check(path, info, directory=False)
        except ControlFolderViolation as link:
            return link
    return ControlFolderViolation(
        f"toolbridge's file {path} cannot be {action}: {exc.strerror}", target=str(path)
    )
