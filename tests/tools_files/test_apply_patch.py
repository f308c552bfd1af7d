"""apply_patch over a real workspace: V4A patches, unified diffs and edits, all or nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools import _patches as patches
from toolbridge.tools.patch import ApplyPatchTool

APP = (
    "import os\n"
    "\n"
    "\n"
    "class Greeter:\n"
    "    def greet(self):\n"
    "        return 'hi'\n"
    "\n"
    "    def part(self):\n"
    "        return 'bye'\n"
    "\n"
    "\n"
    "class Shouter:\n"
    "    def greet(self):\n"
    "        return 'hi'\n"
)


@pytest.fixture
def patcher(workspace: Path) -> ToolRegistry:
    return ToolRegistry(
        [ApplyPatchTool(Workspace(workspace))], context=ToolContext(workspace=workspace)
    )


def v4a(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


async def test_add_update_delete_and_move_in_one_call(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    (workspace / "old.txt").write_text("one\ntwo\n")
    (workspace / "name.txt").write_text("alpha\nbeta\n")
    patch = v4a(
        "*** Add File: docs/new.md",
        "+# Title",
        "+",
        "+text",
        "*** Update File: app.py",
        "@@ class Greeter:",
        "     def part(self):",
        "-        return 'bye'",
        "+        return 'goodbye'",
        "*** Delete File: old.txt",
        "*** Update File: name.txt",
        "*** Move to: renamed/name.txt",
        "@@",
        " alpha",
        "-beta",
        "+gamma",
        "+delta",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert result.text.splitlines() == [
        "Applied: 4 files changed (+6 -4).",
        "added docs/new.md (+3 -0)",
        "updated app.py (+1 -1)",
        "deleted old.txt (+0 -2)",
        "moved name.txt -> renamed/name.txt (+2 -1)",
    ]
    assert (workspace / "docs/new.md").read_text() == "# Title\n\ntext\n"
    assert (workspace / "app.py").read_text() == APP.replace("'bye'", "'goodbye'")
    assert not (workspace / "old.txt").exists()
    assert not (workspace / "name.txt").exists()
    assert (workspace / "renamed/name.txt").read_text() == "alpha\ngamma\ndelta\n"
    assert result.metadata["files"][3] == {
        "path": "name.txt",
        "action": "moved",
        "added": 2,
        "removed": 1,
        "moved_to": "renamed/name.txt",
    }


async def test_nested_anchors_choose_the_method_of_the_named_class(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    patch = v4a(
        "*** Update File: app.py",
        "@@ class Shouter:",
        "@@     def greet(self):",
        "-        return 'hi'",
        "+        return 'HI'",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    text = (workspace / "app.py").read_text()
    assert text.count("'hi'") == 1 and text.endswith("        return 'HI'\n")


async def test_ambiguous_context_is_an_error_naming_the_places(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    patch = v4a(
        "*** Update File: app.py",
        "@@",
        "     def greet(self):",
        "-        return 'hi'",
        "+        return 'hello'",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "hunk 1 of app.py is ambiguous" in result.text
    assert "matches exactly at 2 places (lines 5, 13)" in result.text
    assert (workspace / "app.py").read_text() == APP


async def test_an_ambiguous_anchor_is_settled_by_a_context_found_after_one_only(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    patch = v4a(
        "*** Update File: app.py",
        "@@ def greet(self):",
        "         return 'hi'",
        "+",
        "+    def part(self):",
        "+        return 'bye'",
        " ",
        "-    def part(self):",
    )
    # The anchor is on lines 5 and 13; after line 13 there is no 'def part', so the
    # context decides: only the place after the first anchor fits.
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "app.py").read_text().count("def part(self):") == 1


async def test_missing_context_names_the_file_hunk_and_nearest_lines(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    patch = v4a(
        "*** Update File: app.py",
        "@@",
        " class Greeter:",
        "     def part(self):",
        "-        return 'BYE'",
        "+        return 'x'",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert result.is_error
    assert "hunk 1 of app.py does not apply" in result.text
    assert "The nearest lines in the file:" in result.text
    assert "     8\t    def part(self):" in result.text
    assert "Nothing was changed." in result.text
    assert (workspace / "app.py").read_text() == APP


async def test_whitespace_levels_exact_then_trailing_then_both(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("a = 1   \n  b = 2\nc = 3\n")
    patch = v4a(
        "*** Update File: f.txt",
        "@@",
        " a = 1",  # trailing spaces differ
        "-b = 2",  # indentation differs
        "+b = 20",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_text() == "a = 1   \nb = 20\nc = 3\n"


async def test_an_exact_match_wins_over_a_loose_one(patcher: ToolRegistry, workspace: Path) -> None:
    (workspace / "f.txt").write_text("x = 1 \nx = 1\n")
    patch = v4a("*** Update File: f.txt", "@@", "-x = 1", "+x = 2")
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_text() == "x = 1 \nx = 2\n"


async def test_end_of_file_anchors_the_hunk_at_the_end(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("end\nmiddle\nend\n")
    patch = v4a("*** Update File: f.txt", "@@", " end", "+after", "*** End of File")
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_text() == "end\nmiddle\nend\nafter\n"


@pytest.mark.parametrize(
    ("before", "body", "after", "newline"),
    [
        pytest.param(
            b"one\r\ntwo\r\nthree\r\n",
            (" one", "-two", "+TWO", "+two and a half"),
            b"one\r\nTWO\r\ntwo and a half\r\nthree\r\n",
            "\r\n",  # the patch itself sent with CRLF
            id="a CRLF file stays CRLF, added lines too",
        ),
        pytest.param(b"a\nb", ("-a", "+A"), b"A\nb", "\n", id="no final newline is kept"),
        pytest.param(
            b"a\nb", ("-a", "+A", " b"), b"A\nb", "\n", id="the kept last line keeps no newline"
        ),
        pytest.param(
            # Codex's scenario 014: the lines that replace a last line without a newline
            # are whole lines (V4A cannot say otherwise); they were written without it.
            b"no newline at end",
            ("-no newline at end", "+first line", "+second line"),
            b"first line\nsecond line\n",
            "\n",
            id="lines a V4A patch adds at the end end with a newline",
        ),
        pytest.param(
            # Codex's own cases: the last line's end was replaced by the file's usual one
            # (CRLF where CRLF lines are at least as many as LF lines), changing a line the
            # patch did not touch.
            b"same\r\nsame\n",
            ("-same", " same"),
            b"same\n",
            "\n",
            id="an untouched last line keeps its LF in a mostly CRLF file",
        ),
        pytest.param(
            b"one\r\ntwo\nthree\r\nfour\n",
            (" one", " two", "-three", "+THREE", " four"),
            b"one\r\ntwo\nTHREE\r\nfour\n",
            "\n",
            id="every untouched line keeps its own end in a mixed file",
        ),
    ],
)
async def test_line_ends_follow_the_file(
    patcher: ToolRegistry,
    workspace: Path,
    before: bytes,
    body: tuple[str, ...],
    after: bytes,
    newline: str,
) -> None:
    (workspace / "f.txt").write_bytes(before)
    patch = v4a("*** Update File: f.txt", "@@", *body).replace("\n", newline)
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_bytes() == after


async def test_unified_diff_is_accepted(patcher: ToolRegistry, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src/m.py").write_text("a\nb\nc\nd\n")
    (workspace / "gone.txt").write_text("x\n")
    diff = (
        "diff --git a/src/m.py b/src/m.py\n"
        "index 1111111..2222222 100644\n"
        "--- a/src/m.py\n"
        "+++ b/src/m.py\n"
        "@@ -1,3 +1,3 @@\n"
        " a\n"
        "-b\n"
        "+B\n"
        " c\n"
        "--- /dev/null\n"
        "+++ b/new.txt\n"
        "@@ -0,0 +1,2 @@\n"
        "+first\n"
        "+second\n"
        "--- a/gone.txt\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-x\n"
    )
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert (workspace / "src/m.py").read_text() == "a\nB\nc\nd\n"
    assert (workspace / "new.txt").read_text() == "first\nsecond\n"
    assert not (workspace / "gone.txt").exists()
    assert result.text.splitlines()[1:] == [
        "updated src/m.py (+1 -1)",
        "added new.txt (+2 -0)",
        "deleted gone.txt (+0 -1)",
    ]


async def test_unified_diff_line_numbers_choose_among_equal_places(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("x\ny\nx\ny\n")
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -3,2 +3,2 @@\n x\n-y\n+Y\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_text() == "x\ny\nx\nY\n"


async def test_unified_no_newline_marker(patcher: ToolRegistry, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\n")
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_bytes() == b"a\nc"


async def test_a_failing_second_file_leaves_the_first_unchanged(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "one.txt").write_text("1\n")
    (workspace / "two.txt").write_text("2\n")
    patch = v4a(
        "*** Update File: one.txt",
        "@@",
        "-1",
        "+one",
        "*** Add File: three.txt",
        "+3",
        "*** Update File: two.txt",
        "@@",
        "-not there",
        "+x",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert result.is_error and "hunk 1 of two.txt does not apply" in result.text
    assert (workspace / "one.txt").read_text() == "1\n"
    assert not (workspace / "three.txt").exists()
    assert sorted(os.listdir(workspace)) == ["one.txt", "two.txt"]  # no temporary files


FAILING_WRITE = """
import asyncio, json, resource, signal, sys
from pathlib import Path
from toolbridge import ToolContext, ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools.patch import ApplyPatchTool

workspace = Path(sys.argv[1])
tool = ApplyPatchTool(Workspace(workspace))
registry = ToolRegistry([tool], context=ToolContext(workspace=workspace))
# Files past 4 KB cannot be written (EFBIG): the second file of the patch fails.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
result = asyncio.run(registry.execute("apply_patch", {"patch": sys.stdin.read()}))
print(json.dumps({"text": result.text, "error": result.is_error}))
"""


def test_a_failing_write_puts_back_the_files_already_written(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    patch = v4a(
        "*** Update File: a.txt",
        "@@",
        "-a",
        "+A",
        "*** Add File: c.txt",
        "+c",
        "*** Update File: b.txt",
        "@@",
        "-b",
        *(["+" + "B" * 99] * 100),  # 10 KB: past the limit
    )
    done = subprocess.run(
        [sys.executable, "-c", FAILING_WRITE, str(workspace)],
        input=patch,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["error"], result
    assert "b.txt could not be written" in result["text"]
    assert "nothing was changed" in result["text"]
    assert (workspace / "a.txt").read_text() == "a\n"
    assert (workspace / "b.txt").read_text() == "b\n"
    assert sorted(os.listdir(workspace)) == ["a.txt", "b.txt"]


async def test_dry_run_reports_and_writes_nothing(patcher: ToolRegistry, workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\n")
    patch = v4a("*** Update File: f.txt", "@@", "-a", "+b", "*** Add File: g.txt", "+g")
    result = await patcher.execute("apply_patch", {"patch": patch, "dry_run": True})
    assert result.text.splitlines() == [
        "Dry run: the patch applies cleanly to 2 files (+2 -1); nothing was written.",
        "updated f.txt (+1 -1)",
        "added g.txt (+1 -0)",
    ]
    assert result.metadata["dry_run"] is True
    assert (workspace / "f.txt").read_text() == "a\n"
    assert not (workspace / "g.txt").exists()


async def test_links_out_of_the_workspace_are_refused(
    patcher: ToolRegistry, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (workspace / "inside.txt").write_text("fine\n")
    (workspace / "link").symlink_to(outside)
    (workspace / "file-link").symlink_to(outside / "secret.txt")
    (workspace / "first.txt").write_text("first\n")
    for body in (
        ("*** Update File: link/secret.txt", "@@", "-secret", "+owned"),
        ("*** Update File: file-link", "@@", "-secret", "+owned"),
        ("*** Add File: link/new.txt", "+x"),
        ("*** Delete File: ../outside/secret.txt",),
        ("*** Update File: inside.txt", "*** Move to: link/moved.txt", "@@", "-fine", "+x"),
    ):
        result = await patcher.execute(
            "apply_patch", {"patch": v4a("*** Update File: first.txt", "@@", "-first", "+x", *body)}
        )
        assert result.error_kind is ErrorKind.WORKSPACE_VIOLATION, (body, result.text)
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (workspace / "inside.txt").read_text() == "fine\n"
    assert (workspace / "first.txt").read_text() == "first\n"


async def test_a_symlink_inside_is_not_deleted_through(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "real.txt").write_text("r\n")
    (workspace / "alias.txt").symlink_to("real.txt")
    result = await patcher.execute("apply_patch", {"patch": v4a("*** Delete File: alias.txt")})
    assert result.is_error and "symbolic link" in result.text
    assert (workspace / "real.txt").exists()


async def test_the_file_mode_is_kept_on_update_and_move(
    patcher: ToolRegistry, workspace: Path
) -> None:
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o751)
    other = workspace / "tool.sh"
    other.write_text("#!/bin/sh\necho a\n")
    other.chmod(0o700)
    patch = v4a(
        "*** Update File: run.sh",
        "@@",
        "-echo hi",
        "+echo hello",
        "*** Update File: tool.sh",
        "*** Move to: bin/tool.sh",
        "@@",
        "-echo a",
        "+echo b",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert stat.S_IMODE((workspace / "bin/tool.sh").stat().st_mode) == 0o700
    assert (workspace / "bin/tool.sh").read_text() == "#!/bin/sh\necho b\n"


async def test_add_over_an_existing_file_and_move_onto_one_are_refused(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    added = await patcher.execute("apply_patch", {"patch": v4a("*** Add File: a.txt", "+x")})
    assert added.is_error and "a.txt already exists" in added.text
    moved = await patcher.execute(
        "apply_patch",
        {"patch": v4a("*** Update File: a.txt", "*** Move to: b.txt", "@@", "-a", "+x")},
    )
    assert moved.is_error and "b.txt already exists" in moved.text
    assert (workspace / "a.txt").read_text() == "a\n"
    assert (workspace / "b.txt").read_text() == "b\n"


async def test_two_sections_on_one_file_apply_in_order(
    patcher: ToolRegistry, workspace: Path
) -> None:
    patch = v4a(
        "*** Add File: n.txt",
        "+1",
        "+2",
        "*** Update File: n.txt",
        "@@",
        " 1",
        "-2",
        "+two",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert result.text.splitlines()[1:] == ["added n.txt (+2 -0)"]  # the net change
    assert (workspace / "n.txt").read_text() == "1\ntwo\n"


async def test_edits_replace_exactly_once_and_create_files(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "m.py").write_text("a = 1\nb = 2\n")
    edits = [
        {"path": "m.py", "old_text": "a = 1", "new_text": "a = 10"},
        {"path": "m.py", "old_text": "b = 2\n", "new_text": "b = 20\nc = 30\n"},
        {"path": "pkg/__init__.py", "old_text": "", "new_text": "VERSION = 1\n"},
    ]
    result = await patcher.execute("apply_patch", {"edits": edits})
    assert not result.is_error, result.text
    assert (workspace / "m.py").read_text() == "a = 10\nb = 20\nc = 30\n"
    assert (workspace / "pkg/__init__.py").read_text() == "VERSION = 1\n"
    assert result.text.splitlines()[1:] == [
        "updated m.py (+3 -2)",
        "added pkg/__init__.py (+1 -0)",
    ]


async def test_an_edit_that_matches_twice_or_never_changes_nothing(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "m.py").write_text("x = 1\nx = 1\n")
    (workspace / "n.py").write_text("n\n")
    twice = await patcher.execute(
        "apply_patch",
        {
            "edits": [
                {"path": "n.py", "old_text": "n", "new_text": "N"},
                {"path": "m.py", "old_text": "x = 1", "new_text": "x = 2"},
            ]
        },
    )
    assert twice.is_error and "edit 2: old_text occurs 2 times in m.py" in twice.text
    never = await patcher.execute(
        "apply_patch", {"edits": [{"path": "m.py", "old_text": "x = 3", "new_text": "y"}]}
    )
    assert never.is_error and "edit 1: old_text was not found in m.py" in never.text
    assert (workspace / "n.py").read_text() == "n\n"
    assert (workspace / "m.py").read_text() == "x = 1\nx = 1\n"


async def test_exactly_one_of_patch_and_edits(patcher: ToolRegistry) -> None:
    neither = await patcher.execute("apply_patch", {})
    both = await patcher.execute(
        "apply_patch",
        {
            "patch": v4a("*** Add File: a", "+a"),
            "edits": [{"path": "a", "old_text": "", "new_text": ""}],
        },
    )
    for result in (neither, both):
        assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
        assert "exactly one of `patch` and `edits`" in result.text


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("*** Begin Patch\n*** Add File: a\n+a\n", "does not end with '*** End Patch'"),
        ("just some text", "must start with '*** Begin Patch'"),
        (v4a("*** Frobnicate: a"), "is not a file operation"),
        (v4a("*** Update File: a", "@@", "?x"), "starts with neither"),
        (v4a("*** Update File: a", "@@", " only context"), "has only context lines"),
        (v4a("*** Update File: a"), "has no hunks"),
    ],
)
async def test_a_malformed_patch_is_invalid_arguments(
    patcher: ToolRegistry, workspace: Path, patch: str, message: str
) -> None:
    (workspace / "a").write_text("a\n")
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert message in result.text
    assert (workspace / "a").read_text() == "a\n"


@pytest.mark.parametrize(
    ("before", "patch", "after"),
    [
        pytest.param(
            b"\xef\xbb\xbfkeep\nold\n",
            "<<'EOF'\n" + v4a("*** Update File: f.txt", "@@", " keep", "-old", "+new") + "EOF\n",
            b"\xef\xbb\xbfkeep\nnew\n",
            id="a heredoc wrapper, and the file's BOM kept",
        ),
        pytest.param(
            b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n",
            "\ufeff"
            + v4a("*** Update File: f.txt", "@@", " one", "-two", "+2").replace("\n", "\r\n"),
            b"\xef\xbb\xbfone\r\n2\r\nthree\r\n",
            id="a V4A patch with a byte order mark and CRLF",
        ),
        pytest.param(
            b"x\ny\n",
            "\ufeff--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n",
            b"x\nY\n",
            id="a unified diff with a byte order mark",
        ),
    ],
)
async def test_a_patch_in_a_wrapper_or_with_a_bom_applies(
    patcher: ToolRegistry, workspace: Path, before: bytes, patch: str, after: bytes
) -> None:
    (workspace / "f.txt").write_bytes(before)
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "f.txt").read_bytes() == after


async def test_apply_patch_is_loaded_and_needs_approval_like_write_file(workspace: Path) -> None:
    from toolbridge import ToolLoader

    registry = ToolLoader().registry(ToolContext(workspace=workspace))
    tool = registry.get("apply_patch")
    write = registry.get("write_file")
    assert tool is not None and write is not None
    assert tool.read_only is False and tool.read_only == write.read_only


async def test_hunk_lines_that_look_like_markers_are_content(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "notes.md").write_text("*** Heading ***\n--- rule\nold\n")
    patch = v4a(
        "*** Update File: notes.md",
        "@@",
        " *** Heading ***",
        " --- rule",
        "-old",
        "+*** Add File: not a header",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "notes.md").read_text() == (
        "*** Heading ***\n--- rule\n*** Add File: not a header\n"
    )


async def test_a_missing_anchor_and_hunks_out_of_order_are_errors(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    missing = await patcher.execute(
        "apply_patch",
        {"patch": v4a("*** Update File: app.py", "@@ class Missing:", "-x", "+y")},
    )
    assert missing.is_error
    assert "hunk 1 of app.py: the anchor '@@ class Missing:' was not found" in missing.text
    backwards = await patcher.execute(
        "apply_patch",
        {
            "patch": v4a(
                "*** Update File: app.py",
                "@@",
                " class Shouter:",
                "-    def greet(self):",
                "+    def shout(self):",
                "@@",
                "-import os",
                "+import sys",
            )
        },
    )
    assert backwards.is_error
    assert "hunk 2 of app.py: its context is found only before the place" in backwards.text
    assert (workspace / "app.py").read_text() == APP


async def test_a_git_rename_without_changes(patcher: ToolRegistry, workspace: Path) -> None:
    (workspace / "a.txt").write_text("same\n")
    diff = "diff --git a/a.txt b/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to b.txt\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert result.text.splitlines()[1:] == ["moved a.txt -> b.txt (+0 -0)"]
    assert (workspace / "b.txt").read_text() == "same\n" and not (workspace / "a.txt").exists()


async def test_edits_in_a_crlf_file_keep_crlf(patcher: ToolRegistry, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    result = await patcher.execute(
        "apply_patch", {"edits": [{"path": "w.txt", "old_text": "a\nb\n", "new_text": "a\nB\n"}]}
    )
    assert not result.is_error, result.text
    assert (workspace / "w.txt").read_bytes() == b"a\r\nB\r\nc\r\n"


async def test_a_context_that_repeats_its_anchor_line_applies(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    patch = v4a(
        "*** Update File: app.py",
        "@@ class Shouter:",
        " class Shouter:",
        "     def greet(self):",
        "-        return 'hi'",
        "+        return 'HI'",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "app.py").read_text().endswith("        return 'HI'\n")


async def test_line_numbers_after_a_v4a_at_sign_are_ignored_and_git_context_anchors(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "app.py").write_text(APP)
    patch = v4a(
        "*** Update File: app.py",
        "@@ -12,3 +12,3 @@ class Shouter:",
        "     def greet(self):",
        "-        return 'hi'",
        "+        return 'HI'",
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "app.py").read_text().endswith("        return 'HI'\n")


def test_many_hunks_compare_each_line_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each hunk was looked for at every line from the cursor to the end (to prove it
    unique): 10,000 one-line hunks took seconds. Counted in comparisons, not time."""
    compared = 0

    def counting(normal: Callable[[str], str]) -> Callable[[str], str]:
        def compare(line: str) -> str:
            nonlocal compared
            compared += 1
            return normal(line)

        return compare

    levels = tuple((name, counting(normal)) for name, normal in patches.LEVELS)
    monkeypatch.setattr(patches, "LEVELS", levels)
    size = 2000
    text = "".join(f"line {n}\n" for n in range(size))
    body = [part for n in range(size) for part in ("@@", f"-line {n}", f"+LINE {n}")]
    (change,) = patches.parse_patch(v4a("*** Update File: big.txt", *body))
    lines = patches.apply_hunks(patches.TextLines.split(text), change.hunks, "big.txt")
    assert lines.join() == "".join(f"LINE {n}\n" for n in range(size))
    assert compared < 20 * size  # before: about size * size / 2


async def test_a_unified_deletion_of_other_content_deletes_nothing(
    patcher: ToolRegistry, workspace: Path
) -> None:
    """A diff to /dev/null deleted the file whatever it held (git apply refuses)."""
    (workspace / "x.txt").write_text("totally different\ncontent\n")
    diff = "--- a/x.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert result.is_error
    assert (workspace / "x.txt").read_text() == "totally different\ncontent\n"
    (workspace / "y.txt").write_text("one\ntwo\nthree\n")  # more lines than the diff removes
    diff = "--- a/y.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert result.is_error
    assert "but 1 of its lines is not in the diff's removed lines" in result.text
    assert (workspace / "y.txt").exists()
    diff = "--- a/y.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert not (workspace / "y.txt").exists()
