"""apply_patch refuses to delete or move a symlink, and that holds for a link whose name
is not UTF-8, given back as it is shown (``l\\xe9``). Before, the link check looked for
a file named as written (with a backslash), found none, and let the patch go on: the
guard read the escape, followed the link, and the patch deleted (or moved away) the
file the link points to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import ToolContext, ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools.patch import ApplyPatchTool

LINK = os.fsdecode(b"l\xe9")


@pytest.fixture
def registry(workspace: Path) -> ToolRegistry:
    (workspace / "important.txt").write_text("keep\n")
    (workspace / "d").mkdir()
    (workspace / LINK).symlink_to("important.txt")
    (workspace / "d" / LINK).symlink_to("../important.txt")
    context = ToolContext(workspace=workspace)
    return ToolRegistry(
        [ApplyPatchTool(Workspace(workspace), locks=context.file_locks)], context=context
    )


@pytest.mark.parametrize("path", ["l\\xe9", "d/l\\xe9", "./d/../l\\xe9"])
@pytest.mark.parametrize(
    ("verb", "patch"),
    [
        ("delete", "*** Begin Patch\n*** Delete File: {path}\n*** End Patch\n"),
        (
            "move",
            "*** Begin Patch\n*** Update File: {path}\n*** Move to: moved.txt\n@@\n-keep\n"
            "+kept\n*** End Patch\n",
        ),
    ],
)
async def test_a_link_named_so_is_not_deleted_or_moved_through(
    registry: ToolRegistry, workspace: Path, path: str, verb: str, patch: str
) -> None:
    result = await registry.execute("apply_patch", {"patch": patch.format(path=path)})
    assert result.is_error, result.text
    assert f"cannot {verb} {path}: it is a symbolic link" in result.text, result.text
    assert (workspace / "important.txt").read_text() == "keep\n"
    assert (workspace / LINK).is_symlink() and (workspace / "d" / LINK).is_symlink()
    assert not (workspace / "moved.txt").exists()
