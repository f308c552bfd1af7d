"""A file whose name is not UTF-8 (the bytes ``caf\\xe9.txt`` on Linux) is shown to the
model with each such byte as ``\\xe9``, and that name given back opens the same file:
before, the tools listed it with a lone surrogate (U+DCE9) that no request can carry
(the model saw ``caf\\udce9.txt``, which named no file) and grep showed ``caf\\ufffd.txt``.
The guard still holds: an escape names only a byte from 0x80 to 0xFF, never a ``/``,
``.`` or NUL, and the path it makes is resolved and checked as any other."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolRegistry, WorkspaceViolation
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool
from toolbridge.tools.patch import ApplyPatchTool
from toolbridge.tools.search import GlobTool, GrepTool, SearchConfig

CAFE = os.fsdecode(b"caf\xe9.txt")  # as Python names it: 'caf\udce9.txt'
DIR = os.fsdecode(b"d\xe9")


@pytest.fixture(params=["ripgrep", "python"])
def registry(workspace: Path, request: pytest.FixtureRequest) -> ToolRegistry:
    guard = Workspace(workspace)
    context = ToolContext(workspace=workspace)
    search = SearchConfig(engine=request.param)
    tools = [
        ReadFileTool(guard),
        WriteFileTool(guard, locks=context.file_locks),
        EditFileTool(guard, locks=context.file_locks),
        ListDirTool(guard),
        GlobTool(guard, search),
        GrepTool(guard, search),
        ApplyPatchTool(guard, locks=context.file_locks),
    ]
    return ToolRegistry(tools, context=context)


def sendable(text: str) -> str:
    """`text`, which must be valid Unicode: what a request to a model can carry."""
    text.encode("utf-8")
    return text


@pytest.mark.parametrize(
    ("tool", "arguments", "line"),
    [
        ("list_dir", {}, "caf\\xe9.txt  (6 B)"),
        ("list_dir", {"recursive": True}, "d\\xe9/n\\xe9.txt  (2 B)"),
        ("glob", {"pattern": "**/*.txt"}, "d\\xe9/n\\xe9.txt"),
        ("grep", {"pattern": "hello"}, "caf\\xe9.txt:1: hello"),
    ],
)
async def test_a_non_utf8_name_is_shown_with_its_bytes_escaped(
    registry: ToolRegistry, workspace: Path, tool: str, arguments: dict[str, object], line: str
) -> None:
    (workspace / CAFE).write_text("hello\n")
    (workspace / DIR).mkdir()
    (workspace / DIR / os.fsdecode(b"n\xe9.txt")).write_text("x\n")
    result = await registry.execute(tool, arguments)
    assert not result.is_error, result.text
    assert line in sendable(result.text).splitlines(), result.text


async def test_the_name_shown_opens_the_same_file(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / CAFE).write_text("hello\n")
    (workspace / DIR).mkdir()
    read = await registry.execute("read_file", {"path": "caf\\xe9.txt"})
    assert not read.is_error, read.text
    assert "hello" in read.text
    edit = {"path": "caf\\xe9.txt", "old_string": "hello", "new_string": "bye"}
    edited = await registry.execute("edit_file", edit)
    assert not edited.is_error, edited.text
    assert "caf\\xe9.txt" in sendable(edited.text)
    written = await registry.execute("write_file", {"path": "d\\xe9/new.txt", "content": "n\n"})
    assert not written.is_error, written.text
    assert (workspace / CAFE).read_text() == "bye\n"
    assert (workspace / DIR / "new.txt").read_text() == "n\n"
    assert sorted(os.listdir(workspace)) == sorted([CAFE, DIR])  # no file named as escaped
    listed = await registry.execute("list_dir", {"path": "d\\xe9"})
    assert "d\\xe9/new.txt  (2 B)" in listed.text.splitlines(), listed.text
    patch = "*** Begin Patch\n*** Update File: caf\\xe9.txt\n@@\n-bye\n+patched\n*** End Patch\n"
    patched = await registry.execute("apply_patch", {"patch": patch})
    assert not patched.is_error, patched.text
    assert (workspace / CAFE).read_text() == "patched\n"
    sendable(patched.text)
    assert patched.metadata["files"][0]["path"] == "caf\\xe9.txt"
    json.dumps(patched.metadata, ensure_ascii=False).encode("utf-8")


async def test_errors_name_such_a_file_as_it_is_shown(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / DIR).mkdir()
    result = await registry.execute("read_file", {"path": "d\\xe9"})
    assert result.is_error
    assert "d\\xe9 is a directory" in sendable(result.text), result.text


async def test_a_name_written_with_a_backslash_is_read_as_written_when_it_exists(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "caf\\xe9.txt").write_text("literal\n")  # a backslash in the name
    (workspace / CAFE).write_text("bytes\n")
    read = await registry.execute("read_file", {"path": "caf\\xe9.txt"})
    assert "literal" in read.text and "bytes" not in read.text


@pytest.mark.parametrize("path", ["\\x2e\\x2e/outside/secret.txt", "\\x2f..\\x2foutside"])
async def test_escapes_below_0x80_are_not_read_as_bytes(
    registry: ToolRegistry, workspace: Path, path: str
) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    result = await registry.execute("read_file", {"path": path})
    assert result.is_error and "OUTSIDE-SECRET" not in result.text
    assert "does not exist" in result.text, result.text


async def test_a_non_utf8_link_out_of_the_workspace_is_still_refused(
    registry: ToolRegistry, workspace: Path
) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    (workspace / DIR).symlink_to(outside)
    result = await registry.execute("read_file", {"path": "d\\xe9/secret.txt"})
    assert result.is_error and result.error_kind == ErrorKind.WORKSPACE_VIOLATION, result.text
    assert "OUTSIDE-SECRET" not in result.text
    assert repr("d\\xe9/secret.txt") in sendable(result.text), result.text  # as it was sent
    written = await registry.execute("write_file", {"path": "d\\xe9/x.txt", "content": "x"})
    assert written.error_kind == ErrorKind.WORKSPACE_VIOLATION, written.text
    assert not (outside / "x.txt").exists()


async def test_the_control_folder_cannot_be_spelled_with_escapes(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / ".toolbridge").mkdir()
    (workspace / ".toolbridge" / "journal.db").write_text("JOURNAL")
    result = await registry.execute("read_file", {"path": "\\x2etoolbridge/journal.db"})
    assert result.is_error and "JOURNAL" not in result.text


@pytest.mark.parametrize("tool", ["glob", "grep"])
async def test_a_search_under_such_a_directory_finds_its_files(
    registry: ToolRegistry, workspace: Path, tool: str
) -> None:
    (workspace / DIR).mkdir()
    (workspace / DIR / os.fsdecode(b"n\xe9.txt")).write_text("needle\n")
    (workspace / "other.txt").write_text("needle\n")
    pattern = "*.txt" if tool == "glob" else "needle"
    result = await registry.execute(tool, {"pattern": pattern, "path": "d\\xe9"})
    assert not result.is_error, result.text
    assert "d\\xe9/n\\xe9.txt" in sendable(result.text), result.text
    assert "other.txt" not in result.text


async def test_a_violation_raised_by_a_file_tool_names_such_a_file_as_shown(
    workspace: Path,
) -> None:
    """A guard's violation (a symlink swapped in while a file was opened, say) quotes the
    real name; its message and target (which the loop guard may quote) are shown."""

    class Swapped(ListDirTool):
        async def run(self, **kwargs: object) -> str:
            raise WorkspaceViolation(f"{CAFE} changed while it was being opened", target=CAFE)

    with pytest.raises(WorkspaceViolation) as caught:
        await Swapped(Workspace(workspace)).execute()
    assert caught.value.message == "caf\\xe9.txt changed while it was being opened"
    assert caught.value.target == "caf\\xe9.txt"
    assert str(caught.value) == caught.value.message
