"""A name shown with ``\\xNN`` escapes (a file name that is not UTF-8) opens its file in
every path that names it, and errors name it as it is shown. Before, a path whose
escaped reading exists but whose reading as written fails on the way (``d\\xe9/..``:
'goes up out of d\\xe9, which does not exist') was refused without the escapes being
read, and an error naming a real file on the way showed it as ``d\\udce9`` (Python's
repr of its lone surrogate), which names nothing a model can send back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import ToolContext, ToolRegistry, WorkspaceViolation
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import ListDirTool, ReadFileTool, WriteFileTool
from toolbridge.tools.search import GrepTool, SearchConfig

DIR = os.fsdecode(b"d\xe9")
FILE = os.fsdecode(b"f\xe9.txt")


@pytest.fixture
def registry(workspace: Path) -> ToolRegistry:
    guard = Workspace(workspace)
    context = ToolContext(workspace=workspace)
    tools = [
        ReadFileTool(guard),
        WriteFileTool(guard, locks=context.file_locks),
        ListDirTool(guard),
        GrepTool(guard, SearchConfig(engine="python")),
    ]
    (workspace / DIR).mkdir()
    (workspace / DIR / FILE).write_text("hello\n")
    return ToolRegistry(tools, context=context)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "d\\xe9/../d\\xe9/f\\xe9.txt"}),
        ("read_file", {"path": "./d\\xe9/./../d\\xe9/f\\xe9.txt"}),
        ("list_dir", {"path": "d\\xe9/.."}),
        ("grep", {"pattern": "hello", "path": "d\\xe9/../d\\xe9"}),
    ],
)
async def test_a_path_going_up_out_of_an_escaped_name_opens_it(
    registry: ToolRegistry, tool: str, arguments: dict[str, object]
) -> None:
    result = await registry.execute(tool, arguments)
    assert not result.is_error, result.text
    assert "hello" in result.text or "d\\xe9/" in result.text, result.text


async def test_a_new_file_beside_an_escaped_name_is_written_there(
    registry: ToolRegistry, workspace: Path
) -> None:
    written = await registry.execute(
        "write_file", {"path": "d\\xe9/../d\\xe9/n.txt", "content": "n"}
    )
    assert not written.is_error, written.text
    assert (workspace / DIR / "n.txt").read_text() == "n"


async def test_an_error_names_a_file_on_the_way_as_it_is_shown(registry: ToolRegistry) -> None:
    result = await registry.execute("read_file", {"path": "d\\xe9/f\\xe9.txt/x"})
    assert result.is_error
    assert "udce9" not in result.text, result.text
    assert "f\\\\xe9.txt' is a file, not a directory" in result.text, result.text


async def test_going_up_out_of_the_workspace_through_an_escaped_name_is_refused(
    workspace: Path,
) -> None:
    (workspace / DIR).mkdir()
    guard = Workspace(workspace)
    for path in ("d\\xe9/../../outside", "d\\xe9/../d\\xe9/../../x"):
        with pytest.raises(WorkspaceViolation):
            guard.resolve(path)
