"""apply_patch holds exactly to what issue 21 says: '*** End of File' anchors at the end and
nowhere else, and an edit that changes nothing is an error, as in edit_file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolLoader, ToolRegistry


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return ToolLoader().registry(ToolContext(workspace=workspace))


def v4a(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


END_HUNK = v4a("*** Update File: f.txt", "@@", " x", "-y", "+Y", "*** End of File")


async def test_an_end_of_file_hunk_whose_context_is_not_at_the_end_is_refused(
    tools: ToolRegistry, workspace: Path
) -> None:
    # It was applied where the context occurs elsewhere (lines 1-2), a wrong place.
    (workspace / "f.txt").write_text("x\ny\nz\n")
    result = await tools.execute("apply_patch", {"patch": END_HUNK})
    assert result.error_kind is ErrorKind.EXECUTION_ERROR, result.text
    assert (
        "hunk 1 of f.txt is marked '*** End of File', but its context and removed lines are "
        "not the last lines of the file; the file ends with:\n     2\ty\n     3\tz"
    ) in result.text
    assert "lines 1-2 (100% similar)" in result.text
    assert "Nothing was changed." in result.text
    assert (workspace / "f.txt").read_text() == "x\ny\nz\n"


async def test_an_end_of_file_hunk_on_an_empty_file_says_it_is_empty(
    tools: ToolRegistry, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("")
    result = await tools.execute("apply_patch", {"patch": END_HUNK})
    assert result.is_error
    assert "the file ends with:\n(the file is empty)" in result.text


async def test_an_edit_that_changes_nothing_is_an_error_and_no_file_changes(
    tools: ToolRegistry, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a\n")
    result = await tools.execute(
        "apply_patch",
        {
            "edits": [
                {"path": "b.txt", "old_text": "", "new_text": "new\n"},
                {"path": "a.txt", "old_text": "a", "new_text": "a"},
            ]
        },
    )
    assert result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "edit 2: old_text and new_text are identical, so there is nothing to change" in (
        result.text
    )
    assert os.listdir(workspace) == ["a.txt"]


async def test_an_empty_edit_on_a_new_path_still_creates_an_empty_file(
    tools: ToolRegistry, workspace: Path
) -> None:
    result = await tools.execute(
        "apply_patch", {"edits": [{"path": "e.txt", "old_text": "", "new_text": ""}]}
    )
    assert not result.is_error, result.text
    assert (workspace / "e.txt").read_bytes() == b""


@pytest.mark.parametrize(
    ("files", "patch", "rows"),
    [
        (
            {"a.txt": "a\n"},
            v4a(
                "*** Update File: a.txt",
                "@@",
                "-a",
                "+b",
                "*** Update File: a.txt",
                "@@",
                "-b",
                "+c",
            ),
            ["Applied: 1 file changed (+1 -1).", "updated a.txt (+1 -1)"],
        ),
        (
            {"a.txt": "a\nz\n"},
            v4a(
                "*** Update File: a.txt",
                "@@",
                "-a",
                "+b",
                "*** Update File: a.txt",
                "*** Move to: m.txt",
                "@@",
                "-b",
                "+c",
                "+d",
            ),
            ["Applied: 1 file changed (+2 -1).", "moved a.txt -> m.txt (+2 -1)"],
        ),
        (
            {"a.txt": "a\nz\n"},
            v4a("*** Update File: a.txt", "@@", "-a", "+b", "*** Delete File: a.txt"),
            ["Applied: 1 file changed (+0 -2).", "deleted a.txt (+0 -2)"],
        ),
    ],
)
async def test_a_file_touched_twice_reports_its_net_change(
    tools: ToolRegistry, workspace: Path, files: dict[str, str], patch: str, rows: list[str]
) -> None:
    # The operations' counts were summed: a line changed twice was '+2 -2'.
    for name, text in files.items():
        (workspace / name).write_text(text)
    result = await tools.execute("apply_patch", {"patch": patch})
    assert result.text.splitlines() == rows
    (entry,) = result.metadata["files"]
    assert rows[1].endswith(f"(+{entry['added']} -{entry['removed']})")
