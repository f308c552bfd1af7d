"""Sandboxed exec, which needs no approval, cannot change toolbridge's own folder: it is
mounted read-only, made first when it was missing, and cannot be replaced by a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolRegistry
from toolbridge.tools.shell import ExecConfig, ExecTool

BASE_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}

ATTACKS = [
    "rm -rf .toolbridge",
    "rm -f .toolbridge/journal.sqlite3",
    ": > .toolbridge/journal.sqlite3",
    "ln -sf /tmp/elsewhere .toolbridge/agent-sessions.lock",
    "mkdir -p .toolbridge/skills/evil && echo planted > .toolbridge/skills/evil/SKILL.md",
    "mv .toolbridge moved",
    "rmdir .toolbridge; ln -s /tmp .toolbridge",
]


def sandboxed(workspace: Path) -> ToolRegistry:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=BASE_ENV)
    assert tool.sandboxed
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


@pytest.mark.parametrize("command", ATTACKS)
async def test_a_command_cannot_change_the_control_folder(workspace: Path, command: str) -> None:
    folder = workspace / ".toolbridge"
    folder.mkdir()
    (folder / "journal.sqlite3").write_bytes(b"JOURNAL")
    tools = sandboxed(workspace)
    result = await tools.execute("exec", {"command": f"( {command} ); echo done"})
    assert "done" in result.text  # the command ran, and failed to do harm
    assert stat.S_ISDIR(os.lstat(folder).st_mode)
    assert sorted(p.name for p in folder.iterdir()) == ["journal.sqlite3"]
    assert (folder / "journal.sqlite3").read_bytes() == b"JOURNAL"
    assert not (workspace / "moved").exists()


async def test_a_missing_control_folder_cannot_be_created_by_a_command(workspace: Path) -> None:
    tools = sandboxed(workspace)
    assert not (workspace / ".toolbridge").exists()  # making the tool leaves no trace
    result = await tools.execute(
        "exec", {"command": "ln -s /tmp .toolbridge; mkdir -p .toolbridge/skills/x; echo done"}
    )
    assert "done" in result.text
    folder = workspace / ".toolbridge"
    assert stat.S_ISDIR(os.lstat(folder).st_mode)  # made by toolbridge, before the command
    assert list(folder.iterdir()) == []


async def test_a_linked_control_folder_refuses_the_command(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tools = sandboxed(workspace)
    os.symlink(elsewhere, workspace / ".toolbridge")
    result = await tools.execute("exec", {"command": "echo ran > ran.txt"})
    assert result.is_error and result.error_kind is ErrorKind.WORKSPACE_VIOLATION
    assert "is a symbolic link" in result.text
    assert not (workspace / "ran.txt").exists()
