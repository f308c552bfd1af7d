"""Unified diffs as git writes them (quoted paths with octal escapes) and patches sent inside
a Markdown code fence: read as the patch they hold."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolLoader, ToolRegistry
from toolbridge.tools._patches import parse_patch


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return ToolLoader().registry(ToolContext(workspace=workspace))


async def test_a_git_quoted_non_ascii_path_names_the_file(
    tools: ToolRegistry, workspace: Path
) -> None:
    # git writes 'spécial.txt' as "a/sp\303\251cial.txt": it was looked up literally.
    (workspace / "spécial.txt").write_text("x\n")
    diff = (
        'diff --git "a/sp\\303\\251cial.txt" "b/sp\\303\\251cial.txt"\n'
        "index 1111111..2222222 100644\n"
        '--- "a/sp\\303\\251cial.txt"\n'
        '+++ "b/sp\\303\\251cial.txt"\n'
        "@@ -1 +1 @@\n-x\n+y\n"
    )
    result = await tools.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert result.text.splitlines()[1] == "updated spécial.txt (+1 -1)"
    assert (workspace / "spécial.txt").read_text() == "y\n"


@pytest.mark.parametrize(
    ("quoted", "path"),
    [
        ('"a/tab\\there.txt"', "tab\there.txt"),
        ('"a/q\\"uote\\\\back.txt"', 'q"uote\\back.txt'),
        ('"a/\\346\\227\\245.txt"', "日.txt"),
        ("a/plain name.txt", "plain name.txt"),
    ],
)
def test_quoted_paths_are_read_as_git_writes_them(quoted: str, path: str) -> None:
    target = quoted.replace("a/", "b/", 1)
    (change,) = parse_patch(f"--- {quoted}\n+++ {target}\n@@ -1 +1 @@\n-x\n+y\n")
    assert change.path == path and change.move_to is None


def test_a_quoted_rename_is_read_too() -> None:
    diff = (
        'diff --git "a/\\303\\251.txt" "b/\\303\\251t\\303\\251.txt"\n'
        "similarity index 100%\n"
        'rename from "\\303\\251.txt"\n'
        'rename to "\\303\\251t\\303\\251.txt"\n'
    )
    (change,) = parse_patch(diff)
    assert (change.path, change.move_to) == ("é.txt", "été.txt")


@pytest.mark.parametrize(
    ("quoted", "problem"),
    [('"a/bad\\q.txt"', "unknown escape '\\\\q'"), ('"a/\\377.txt"', "is not UTF-8")],
)
async def test_a_badly_quoted_path_is_an_argument_error(
    tools: ToolRegistry, quoted: str, problem: str
) -> None:
    diff = f"--- {quoted}\n+++ {quoted}\n@@ -1 +1 @@\n-x\n+y\n"
    result = await tools.execute("apply_patch", {"patch": diff})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert problem in result.text


@pytest.mark.parametrize("opening", ["```", "```diff", "```patch", "  ```text"])
async def test_a_patch_in_a_code_fence_is_the_patch_inside(
    tools: ToolRegistry, workspace: Path, opening: str
) -> None:
    patch = f"{opening}\n*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n```\n"
    result = await tools.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "a.txt").read_text() == "x\n"


async def test_an_unclosed_fence_is_not_unwrapped(tools: ToolRegistry, workspace: Path) -> None:
    patch = "```\n*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"
    result = await tools.execute("apply_patch", {"patch": patch})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "the patch starts with '```'" in result.text
    assert not (workspace / "a.txt").exists()


FORMAT_PATCH = (
    "From 1234567 Mon Sep 17 00:00:00 2001\n"
    "From: A <a@example.com>\n"
    "Subject: [PATCH] fix\n"
    "\n"
    "---\n"
    " a.txt | 2 +-\n"
    " 1 file changed, 1 insertion(+), 1 deletion(-)\n"
    "\n"
    "diff --git a/a.txt b/a.txt\n"
    "index 1111111..2222222 100644\n"
    "--- a/a.txt\n"
    "+++ b/a.txt\n"
    "@@ -1,2 +1,2 @@\n"
    " x\n"
    "-y\n"
    "+Y\n"
    "-- \n"
    "2.40.0\n"
)


async def test_git_format_patch_output_applies_without_its_signature(
    tools: ToolRegistry, workspace: Path
) -> None:
    # The '-- ' line that ends the mail was read as the removal of a line '- '.
    (workspace / "a.txt").write_text("x\ny\n")
    result = await tools.execute("apply_patch", {"patch": FORMAT_PATCH})
    assert not result.is_error, result.text
    assert (workspace / "a.txt").read_text() == "x\nY\n"


async def test_a_removed_dash_space_line_inside_a_hunk_is_still_removed(
    tools: ToolRegistry, workspace: Path
) -> None:
    (workspace / "a.md").write_text("x\n- \nz\n")
    diff = "--- a/a.md\n+++ b/a.md\n@@ -1,3 +1,2 @@\n x\n-- \n z\n"
    result = await tools.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert (workspace / "a.md").read_text() == "x\nz\n"


def git_add(path: str, mode: str, line: str) -> str:
    return (
        f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{line}\n"
    )


async def test_a_git_new_file_mode_is_given_to_the_added_file_only(
    tools: ToolRegistry, workspace: Path
) -> None:
    # 'new file mode 100755' was ignored: a script git adds as executable was not.
    diff = git_add("run.sh", "100755", "echo hi") + (
        "diff --git a/b.txt b/b.txt\n--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+z\n"
    )
    result = await tools.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert stat.S_IMODE((workspace / "run.sh").stat().st_mode) == 0o755
    assert (workspace / "run.sh").read_text() == "echo hi\n"
    assert not (workspace / "b.txt").stat().st_mode & 0o111


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("120000", "the diff makes l a symbolic link (mode 120000); apply_patch writes "),
        ("160000", "the diff makes l a submodule (gitlink) (mode 160000)"),
        ("10075", "'new file mode 10075' gives no file mode git writes"),
    ],
)
async def test_a_git_link_or_submodule_or_bad_mode_is_refused(
    tools: ToolRegistry, workspace: Path, mode: str, problem: str
) -> None:
    # A symlink's diff made a regular file holding the link's target as text.
    result = await tools.execute("apply_patch", {"patch": git_add("l", mode, "target")})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert problem in result.text
    assert os.listdir(workspace) == []
