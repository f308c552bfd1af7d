"""A path spelled as a directory ('nd/', 'nd/.') is not a file to write: the guard drops the
'/', and write_file on 'nd/' made a FILE named nd."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ErrorKind, ToolContext, ToolLoader, ToolRegistry


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return ToolLoader().registry(ToolContext(workspace=workspace))


@pytest.mark.parametrize(
    ("name", "arguments", "ending"),
    [
        ("write_file", {"path": "nd/", "content": "x"}, "/"),
        ("write_file", {"path": "nd//", "content": "x"}, "/"),
        ("write_file", {"path": "nd/.", "content": "x"}, "/."),
        ("write_file", {"path": "sub/nd/", "content": "x"}, "/"),
        ("apply_patch", {"edits": [{"path": "nd/", "old_text": "", "new_text": "x"}]}, "/"),
        (
            "apply_patch",
            {"patch": "*** Begin Patch\n*** Add File: nd/.\n+x\n*** End Patch"},
            "/.",
        ),
        (
            "apply_patch",
            {"patch": "--- /dev/null\n+++ b/nd/.\n@@ -0,0 +1 @@\n+x\n"},
            "/.",
        ),
    ],
)
async def test_a_path_ending_like_a_directory_is_refused_and_nothing_is_made(
    tools: ToolRegistry, workspace: Path, name: str, arguments: dict[str, Any], ending: str
) -> None:
    result = await tools.execute(name, arguments)
    assert result.is_error and result.error_kind is ErrorKind.INVALID_ARGUMENTS, result.text
    assert f"names a directory (it ends with '{ending}'), not a file" in result.text
    assert "DIR/NAME" in result.text
    assert os.listdir(workspace) == []


@pytest.mark.parametrize(
    "header", ["*** Add File: newdir/", "*** Delete File: newdir/", "*** Update File: a.txt/"]
)
async def test_a_patch_file_header_naming_a_directory_is_refused(
    tools: ToolRegistry, workspace: Path, header: str
) -> None:
    """'*** Add File: newdir/' created a FILE named newdir (the guard drops the '/')."""
    (workspace / "a.txt").write_text("a\n")
    body = [] if "Delete" in header else ["+x"] if "Add" in header else ["@@", "-a", "+b"]
    patch = "\n".join(["*** Begin Patch", header, *body, "*** End Patch"])
    result = await tools.execute("apply_patch", {"patch": patch})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "names a directory (it ends with '/'), not a file" in result.text
    assert os.listdir(workspace) == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "a\n"


async def test_an_existing_directory_with_a_slash_is_still_refused_as_a_directory(
    tools: ToolRegistry, workspace: Path
) -> None:
    (workspace / "d").mkdir()
    result = await tools.execute("write_file", {"path": "d/", "content": "x"})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "'d/' names a directory" in result.text
    assert os.listdir(workspace) == ["d"] and os.listdir(workspace / "d") == []


async def test_a_file_path_without_a_slash_is_written(tools: ToolRegistry, workspace: Path) -> None:
    result = await tools.execute("write_file", {"path": "sub/nd", "content": "x"})
    assert not result.is_error, result.text
    assert "nd" in os.listdir(workspace / "sub")
