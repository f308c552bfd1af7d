"""toolbridge's own folder (``.toolbridge/``): the guard refuses it at any spelling, and
toolbridge opens its files there without following a planted link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge.core.errors import ErrorKind, WorkspaceViolation
from toolbridge.journal import JournalError, SQLiteJournal
from toolbridge.security.control import (
    ControlFolderViolation,
    control_file,
    control_folder,
    open_control_file,
)
from toolbridge.security.workspace import Workspace

SPELLINGS = [
    ".toolbridge",
    ".toolbridge/",
    "./.toolbridge",
    ".//.toolbridge/journal.sqlite3",
    "a/../.toolbridge",
    "a/../.toolbridge/journal.sqlite3",
    ".toolbridge/../a",  # not even walked through
    ".toolbridge/new/file.txt",
    "to-control",  # a symlink in the workspace pointing at the folder
    "to-control/journal.sqlite3",
    "to-journal",  # a symlink pointing at a file in it
    "a/up/.toolbridge/skills",  # a/up -> .. (the root)
]


@pytest.fixture
def laid_out(workspace: Path) -> Path:
    (workspace / ".toolbridge").mkdir()
    (workspace / ".toolbridge" / "journal.sqlite3").write_bytes(b"JOURNAL")
    (workspace / "a").mkdir()
    os.symlink(".toolbridge", workspace / "to-control")
    os.symlink(".toolbridge/journal.sqlite3", workspace / "to-journal")
    os.symlink("..", workspace / "a" / "up")
    return workspace


@pytest.mark.parametrize("path", SPELLINGS)
def test_every_spelling_of_the_control_folder_is_refused(laid_out: Path, path: str) -> None:
    guard = Workspace(laid_out)
    with pytest.raises(ControlFolderViolation) as caught:
        guard.resolve(path)
    assert isinstance(caught.value, WorkspaceViolation)
    assert caught.value.kind is ErrorKind.WORKSPACE_VIOLATION
    assert "toolbridge's own folder" in caught.value.message


def test_the_absolute_path_is_refused_and_a_similar_name_is_not(laid_out: Path) -> None:
    guard = Workspace(laid_out)
    with pytest.raises(ControlFolderViolation):
        guard.resolve(str(laid_out / ".toolbridge" / "journal.sqlite3"))
    (laid_out / ".toolbridge-notes").write_text("mine")
    assert guard.resolve(".toolbridge-notes") == laid_out / ".toolbridge-notes"
    assert guard.resolve("a/.toolbridge") == laid_out / "a" / ".toolbridge"  # only the root's


def test_a_missing_control_folder_is_refused_too(workspace: Path) -> None:
    guard = Workspace(workspace)
    with pytest.raises(ControlFolderViolation):
        guard.resolve(".toolbridge/skills/evil/SKILL.md")
    with pytest.raises(ControlFolderViolation):
        guard.write_atomic(workspace / ".toolbridge" / "x", b"data")
    assert not (workspace / ".toolbridge").exists()


def test_walks_leave_the_control_folder_out(laid_out: Path) -> None:
    guard = Workspace(laid_out)
    seen = {guard.relative(entry.path) for entry in guard.walk(guard.root, max_depth=5)}
    assert "a" in seen
    assert not any(path.startswith(".toolbridge") for path in seen)


# --- toolbridge's own opening -----------------------------------------------------------


def test_control_folder_is_made_private_and_checked(workspace: Path) -> None:
    folder = control_folder(workspace)
    assert folder == workspace / ".toolbridge" and folder.is_dir()
    assert not folder.stat().st_mode & 0o077
    assert control_folder(workspace) == folder  # idempotent


def test_a_linked_control_folder_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, workspace / ".toolbridge")
    with pytest.raises(ControlFolderViolation, match="is a symbolic link"):
        control_folder(workspace)
    with pytest.raises(ControlFolderViolation, match="is a symbolic link"):
        open_control_file(workspace, "agent-sessions.lock", os.O_RDWR | os.O_CREAT)
    # The journal says it as every failure of its own: a JournalError naming what to remove.
    with pytest.raises(JournalError, match="is a symbolic link"):
        SQLiteJournal.in_workspace(workspace)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", ["agent-sessions.lock", "journal.sqlite3"])
def test_a_planted_link_in_the_control_folder_is_refused(
    workspace: Path, tmp_path: Path, name: str
) -> None:
    target = tmp_path / "victim"
    (workspace / ".toolbridge").mkdir()
    os.symlink(target, workspace / ".toolbridge" / name)
    if name == "journal.sqlite3":  # the journal's own error, naming the link to remove
        with pytest.raises(JournalError, match="is a symbolic link") as refused:
            SQLiteJournal.in_workspace(workspace)
        assert str(workspace / ".toolbridge" / name) in str(refused.value)
        assert "Remove it" in str(refused.value)
    else:
        with pytest.raises(ControlFolderViolation) as caught:
            open_control_file(workspace, name, os.O_RDWR | os.O_CREAT)
        assert "is a symbolic link" in caught.value.message
        assert f"rm '{workspace / '.toolbridge' / name}'" in caught.value.message
    assert not target.exists() and not target.is_symlink()


def test_control_file_and_open_control_file_accept_their_own_files(workspace: Path) -> None:
    path = control_file(workspace, "journal.sqlite3")
    assert path == workspace / ".toolbridge" / "journal.sqlite3" and not path.exists()
    fd = open_control_file(workspace, "agent-sessions.lock", os.O_RDWR | os.O_CREAT)
    os.close(fd)
    assert (workspace / ".toolbridge" / "agent-sessions.lock").is_file()
    fd = open_control_file(workspace, "agent-sessions.lock", os.O_RDWR)
    os.close(fd)
    (workspace / ".toolbridge" / "journal.sqlite3").mkdir()
    with pytest.raises(ControlFolderViolation, match="not a regular file"):
        control_file(workspace, "journal.sqlite3")
    with pytest.raises(ValueError, match="not a plain file name"):
        control_file(workspace, "../x")
