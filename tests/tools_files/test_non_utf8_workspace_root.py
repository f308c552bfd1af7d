"""A workspace whose own path is not UTF-8 (``/srv/caf\\xe9/ws``): the guard's messages
and violation targets name it as the tools show such names (``\\xe9``). Before, they
held its lone surrogate: the exec tool, which is not a file tool, passed the guard's
violation on as it was, so the model and the loop guard got ``caf\\udce9``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import WorkspaceViolation
from toolbridge.security.workspace import Workspace
from toolbridge.tools.shell import ExecConfig, ExecTool


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / os.fsdecode(b"caf\xe9") / "ws"
    path.mkdir(parents=True)
    return path


def sendable(exc: WorkspaceViolation) -> str:
    message = str(exc)
    message.encode("utf-8")  # UnicodeEncodeError on a lone surrogate
    assert exc.target is not None
    exc.target.encode("utf-8")
    return message


@pytest.mark.parametrize("path", ["..", "/etc/passwd", "../../x"])
def test_a_violation_names_the_root_as_it_is_shown(root: Path, path: str) -> None:
    with pytest.raises(WorkspaceViolation) as raised:
        Workspace(root).resolve(path)
    assert "caf\\xe9/ws)" in sendable(raised.value)


def test_opening_outside_names_the_path_as_it_is_shown(root: Path) -> None:
    with pytest.raises(WorkspaceViolation) as raised:
        Workspace(root).open_read(root.parent / "x.txt")
    assert sendable(raised.value).startswith(f"{root.parent}/x.txt".replace("\udce9", "\\xe9"))


async def test_the_exec_tool_passes_on_a_violation_a_model_can_be_sent(root: Path) -> None:
    tool = ExecTool(root, ExecConfig(sandbox="none"))
    with pytest.raises(WorkspaceViolation) as raised:
        await tool.execute(command="pwd", cwd="..")
    assert "caf\\xe9/ws)" in sendable(raised.value)


def test_an_absolute_path_spelled_as_shown_is_inside(root: Path) -> None:
    """The root's path, as a violation names it (``/…/caf\\xe9/ws``), leads inside: it
    was called outside the workspace, a boundary the model is told not to try again."""
    (root / os.fsdecode(b"f\xe9.txt")).write_text("hello\n")
    guard = Workspace(root)
    shown = str(root).replace("\udce9", "\\xe9")
    assert guard.resolve(f"{shown}/f\\xe9.txt") == root / os.fsdecode(b"f\xe9.txt")
    assert guard.resolve(f"{shown}/new\\xe9.txt") == root / os.fsdecode(b"new\xe9.txt")
    for outside in (f"{shown}/..", f"{shown}/../x\\xe9", f"{shown}x/a"):
        with pytest.raises(WorkspaceViolation):
            guard.resolve(outside)


def test_a_link_outside_named_as_written_is_still_refused(root: Path, tmp_path: Path) -> None:
    (root / "l\\xe9").symlink_to(tmp_path)  # a backslash in the link's name
    (root / os.fsdecode(b"l\xe9")).mkdir()
    with pytest.raises(WorkspaceViolation):
        Workspace(root).resolve("l\\xe9/x")  # as written it exists, and leads outside
