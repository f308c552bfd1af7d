"""Review: apply_patch at the seams a held-out check would try (real files, the real tool)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from toolbridge import ToolContext, ToolRegistry, patches
from toolbridge.security.workspace import Workspace
from toolbridge.tools.patch import ApplyPatchTool


@pytest.fixture
def patcher(workspace: Path) -> ToolRegistry:
    return ToolRegistry(
        [ApplyPatchTool(Workspace(workspace))], context=ToolContext(workspace=workspace)
    )


def v4a(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


async def test_a_v4a_patch_with_a_byte_order_mark_and_crlf_applies(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "c.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    patch = "\ufeff" + v4a("*** Update File: c.txt", "@@", " one", "-two", "+2").replace(
        "\n", "\r\n"
    )
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "c.txt").read_bytes() == b"\xef\xbb\xbfone\r\n2\r\nthree\r\n"


async def test_a_unified_diff_with_a_byte_order_mark_applies(
    patcher: ToolRegistry, workspace: Path
) -> None:
    (workspace / "u.txt").write_text("x\ny\n")
    patch = "\ufeff--- a/u.txt\n+++ b/u.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n"
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "u.txt").read_text() == "x\nY\n"


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


async def test_lines_a_v4a_patch_adds_at_the_end_end_with_a_newline(
    patcher: ToolRegistry, workspace: Path
) -> None:
    """Codex's scenario 014: the file's last line had no newline; the lines that replace it
    are whole lines (V4A cannot say otherwise). They were written without the newline."""
    (workspace / "n.txt").write_text("no newline at end")
    patch = v4a("*** Update File: n.txt", "@@", "-no newline at end", "+first line", "+second line")
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "n.txt").read_text() == "first line\nsecond line\n"
    (workspace / "k.txt").write_text("a\nb")  # the last line kept as it is: still no newline
    patch = v4a("*** Update File: k.txt", "@@", "-a", "+A", " b")
    result = await patcher.execute("apply_patch", {"patch": patch})
    assert not result.is_error, result.text
    assert (workspace / "k.txt").read_text() == "A\nb"


@pytest.mark.parametrize(
    ("before", "body", "after"),
    [
        # Codex's own cases: an untouched last line keeps its own line end.
        (b"same\r\nsame\n", ("-same", " same"), b"same\n"),
        (
            b"one\r\ntwo\nthree\r\nfour\n",
            (" one", " two", "-three", "+THREE", " four"),
            b"one\r\ntwo\nTHREE\r\nfour\n",
        ),
    ],
)
async def test_the_last_line_keeps_its_own_line_end_in_a_mixed_file(
    patcher: ToolRegistry, workspace: Path, before: bytes, body: tuple[str, ...], after: bytes
) -> None:
    """The last line's end was replaced by the file's usual one (CRLF where CRLF lines are
    at least as many as LF lines), changing a line the patch did not touch."""
    (workspace / "m.txt").write_bytes(before)
    result = await patcher.execute(
        "apply_patch", {"patch": v4a("*** Update File: m.txt", "@@", *body)}
    )
    assert not result.is_error, result.text
    assert (workspace / "m.txt").read_bytes() == after


async def test_concurrent_calls_lose_no_change_they_report_applied(
    patcher: ToolRegistry, workspace: Path
) -> None:
    """Two calls planned from the same text both passed the 'unchanged' check and both
    wrote: 12 of 16 reported 'Applied' and 4 lines were in the file (nanobot tests this)."""
    (workspace / "s.txt").write_text("seed\n")
    count = 16
    results = await asyncio.gather(
        *(
            patcher.execute(
                "apply_patch", {"patch": v4a("*** Update File: s.txt", "@@", " seed", f"+n{i:02d}")}
            )
            for i in range(count)
        )
    )
    applied = [i for i, result in enumerate(results) if not result.is_error]
    lines = (workspace / "s.txt").read_text().splitlines()
    assert sorted(lines[1:]) == [f"n{i:02d}" for i in applied]
    assert len(applied) == count


@pytest.mark.parametrize(
    "header", ["*** Add File: newdir/", "*** Delete File: newdir/", "*** Update File: a.txt/"]
)
async def test_a_file_header_naming_a_directory_is_refused(
    patcher: ToolRegistry, workspace: Path, header: str
) -> None:
    """'*** Add File: newdir/' created a FILE named newdir (the guard drops the '/')."""
    (workspace / "a.txt").write_text("a\n")
    body = [] if "Delete" in header else ["+x"] if "Add" in header else ["@@", "-a", "+b"]
    result = await patcher.execute("apply_patch", {"patch": v4a(header, *body)})
    assert result.is_error
    assert "names a directory" in result.text
    assert sorted(os.listdir(workspace)) == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "a\n"


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
    assert "1 of its lines" in result.text
    assert (workspace / "y.txt").exists()
    diff = "--- a/y.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n"
    result = await patcher.execute("apply_patch", {"patch": diff})
    assert not result.is_error, result.text
    assert not (workspace / "y.txt").exists()
