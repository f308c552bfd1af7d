"""The guard's opening helpers: no-follow walks, non-regular files, atomic writes, walks."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from toolbridge.core.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.security.workspace import InvalidPath, Workspace


def test_open_read_reads_a_regular_file(guard: Workspace, workspace: Path) -> None:
    (workspace / "a.txt").write_bytes(b"hello")
    with guard.open_read(guard.resolve("a.txt")) as file:
        assert file.read() == b"hello"


def test_a_fifo_is_refused_without_blocking(guard: Workspace, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    real = guard.resolve("pipe")
    with pytest.raises(InvalidPath, match="FIFO"):
        guard.open_read(real)  # no writer: a blocking open would hang here forever
    with pytest.raises(InvalidPath, match="FIFO"):
        guard.write_atomic(real, b"data")
    assert stat.S_ISFIFO(os.lstat(workspace / "pipe").st_mode)


def test_a_unix_socket_is_refused(guard: Workspace, workspace: Path) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(workspace / "sock"))
        with pytest.raises(InvalidPath, match="regular file"):
            guard.open_read(guard.resolve("sock"))
    finally:
        server.close()


def test_directories_are_not_files(guard: Workspace, workspace: Path) -> None:
    (workspace / "d").mkdir()
    for path in ("d", "."):
        with pytest.raises(ToolExecutionError, match="is a directory"):
            guard.open_read(guard.resolve(path))
        with pytest.raises(ToolExecutionError, match="is a directory"):
            guard.write_atomic(guard.resolve(path), b"x")


def test_missing_files_say_so(guard: Workspace) -> None:
    with pytest.raises(ToolExecutionError, match="does not exist"):
        guard.open_read(guard.resolve("nope/missing.txt"))


def test_a_directory_swapped_for_a_symlink_after_the_check_is_refused(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "secret.txt").write_text("inside")
    real = guard.resolve("d/secret.txt")
    (workspace / "d").rename(workspace / "d-moved")
    (workspace / "d").symlink_to(outside)
    with pytest.raises(WorkspaceViolation, match="changed while it was being opened"):
        guard.open_read(real)
    with pytest.raises(WorkspaceViolation, match="changed while it was being opened"):
        guard.write_atomic(real, b"overwrite")
    with pytest.raises(WorkspaceViolation), guard.open_dir(real.parent):
        pass
    assert (outside / "secret.txt").read_text() == "OUTSIDE-SECRET\n"


def test_a_file_swapped_for_a_symlink_after_the_check_is_refused(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    (workspace / "f.txt").write_text("inside")
    real = guard.resolve("f.txt")
    (workspace / "f.txt").unlink()
    (workspace / "f.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(WorkspaceViolation):
        guard.open_read(real)
    with pytest.raises(WorkspaceViolation):
        guard.write_atomic(real, b"overwrite")
    assert (outside / "secret.txt").read_text() == "OUTSIDE-SECRET\n"


def test_open_helpers_refuse_paths_outside_even_when_given_directly(
    guard: Workspace, outside: Path
) -> None:
    with pytest.raises(WorkspaceViolation):
        guard.open_read(outside / "secret.txt")
    with pytest.raises(WorkspaceViolation):
        guard.write_atomic(outside / "new.txt", b"x")
    assert not (outside / "new.txt").exists()


def test_a_replaced_root_is_noticed(tmp_path: Path, workspace: Path) -> None:
    guard = Workspace(workspace)
    workspace.rename(tmp_path / "old-root")
    workspace.mkdir()
    (workspace / "a.txt").write_text("planted")
    with pytest.raises(WorkspaceViolation, match="was replaced"):
        guard.open_read(workspace / "a.txt")


def test_write_atomic_creates_parents_and_keeps_permissions(
    guard: Workspace, workspace: Path
) -> None:
    assert guard.write_atomic(guard.resolve("a/b/c.txt"), b"one") is True
    assert (workspace / "a" / "b" / "c.txt").read_bytes() == b"one"
    script = workspace / "run.sh"
    script.write_text("old")
    script.chmod(0o751)
    assert guard.write_atomic(guard.resolve("run.sh"), b"new") is False
    assert script.read_text() == "new"
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert sorted(p.name for p in workspace.iterdir()) == ["a", "run.sh"]


def test_write_atomic_through_an_inside_symlink_writes_the_target(
    guard: Workspace, workspace: Path
) -> None:
    (workspace / "real.txt").write_text("old")
    (workspace / "alias.txt").symlink_to("real.txt")
    guard.write_atomic(guard.resolve("alias.txt"), b"new")
    assert (workspace / "real.txt").read_text() == "new"
    assert (workspace / "alias.txt").is_symlink()


def test_failed_write_leaves_no_temporary_file(guard: Workspace, workspace: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "f").write_text("file")
    with pytest.raises(ToolExecutionError):
        guard.write_atomic(guard.resolve("f") / "x", b"data")  # parent is a file
    assert sorted(p.name for p in workspace.iterdir()) == ["d", "f"]


def test_walk_never_follows_symlinks_and_ends_on_loops(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "a" / "b" / "f.txt").write_text("12345")
    (workspace / "a" / "loop").symlink_to(workspace / "a")
    (workspace / "escape").symlink_to(outside)
    entries = list(guard.walk(workspace, max_depth=50))
    seen = {(guard.relative(e.path), e.kind) for e in entries}
    assert seen == {
        ("a", "dir"),
        ("a/b", "dir"),
        ("a/b/f.txt", "file"),
        ("a/loop", "symlink"),
        ("escape", "symlink"),
    }
    assert next(e for e in entries if e.kind == "file").size == 5
    assert all(guard.contains(e.path) for e in entries)


def test_walk_respects_depth_and_skipped_directories(guard: Workspace, workspace: Path) -> None:
    (workspace / "x" / "y" / "z").mkdir(parents=True)
    (workspace / ".git" / "objects").mkdir(parents=True)
    names = [guard.relative(e.path) for e in guard.walk(workspace, max_depth=2)]
    assert names == [".git", ".git/objects", "x", "x/y"]
    skipped = guard.walk(workspace, max_depth=5, skip_dirs=frozenset({".git"}))
    assert [guard.relative(e.path) for e in skipped] == [".git", "x", "x/y", "x/y/z"]


def test_read_files_reads_many_files_as_safely_as_open_read(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    (workspace / "a").mkdir()
    (workspace / "a" / "one.txt").write_bytes(b"1")
    (workspace / "a" / "two.txt").write_bytes(b"22222")
    (workspace / "b.txt").write_bytes(b"b")
    (workspace / "a" / "link.txt").symlink_to(outside / "secret.txt")
    os.mkfifo(workspace / "a" / "pipe")
    names = ["a/one.txt", "a/link.txt", "a/pipe", "a/two.txt", "b.txt", "a/gone.txt"]
    results = dict(guard.read_files([workspace / n for n in names], max_bytes=3))
    assert results[workspace / "a" / "one.txt"] == b"1"
    assert results[workspace / "a" / "two.txt"] == b"2222"  # max_bytes + 1, to tell "more"
    assert results[workspace / "b.txt"] == b"b"
    assert isinstance(results[workspace / "a" / "link.txt"], WorkspaceViolation)
    assert isinstance(results[workspace / "a" / "pipe"], InvalidPath)
    assert isinstance(results[workspace / "a" / "gone.txt"], ToolExecutionError)
