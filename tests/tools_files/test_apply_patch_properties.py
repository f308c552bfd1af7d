"""Property: a diff of two texts, sent to apply_patch as a unified diff or as V4A hunks,
turns the first text into the second, or (V4A without line numbers) is refused as
ambiguous and changes nothing. Real files, real tool calls."""

from __future__ import annotations

import asyncio
import difflib
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolbridge import ToolContext, ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools.patch import ApplyPatchTool

LINES = st.lists(st.sampled_from(["a", "b", "c", "", "  d", "e  ", "x = 1", "}"]), max_size=14)


def run(before: list[str], after: list[str], make_patch: str) -> tuple[bool, str, str]:
    """Apply the diff of `before` -> `after`; (error?, text of the result, file after)."""
    with tempfile.TemporaryDirectory() as root:
        workspace = Path(root)
        (workspace / "f.txt").write_text("".join(f"{line}\n" for line in before))
        diff = list(
            difflib.unified_diff(
                [f"{line}\n" for line in before],
                [f"{line}\n" for line in after],
                "a/f.txt",
                "b/f.txt",
                n=2,
            )
        )
        if make_patch == "v4a":
            body = [line if not line.startswith("@@") else "@@\n" for line in diff[2:]]
            patch = "*** Begin Patch\n*** Update File: f.txt\n" + "".join(body) + "*** End Patch\n"
        else:
            patch = "".join(diff)
        registry = ToolRegistry(
            [ApplyPatchTool(Workspace(workspace))], context=ToolContext(workspace=workspace)
        )
        result = asyncio.run(registry.execute("apply_patch", {"patch": patch}))
        return result.is_error, result.text, (workspace / "f.txt").read_text()


@settings(max_examples=60, deadline=None)
@given(before=LINES, after=LINES)
@example(before=[""], after=["a", ""])  # the diff ends with a context line " "
def test_a_unified_diff_always_turns_before_into_after(before: list[str], after: list[str]) -> None:
    if before == after:
        return
    error, text, content = run(before, after, "unified")
    assert not error, text
    assert content == "".join(f"{line}\n" for line in after)


@settings(max_examples=60, deadline=None)
@given(before=LINES, after=LINES)
def test_v4a_hunks_apply_exactly_or_are_refused_as_ambiguous(
    before: list[str], after: list[str]
) -> None:
    if before == after:
        return
    error, text, content = run(before, after, "v4a")
    if error:
        assert "ambiguous" in text or "only before the place" in text, text
        assert content == "".join(f"{line}\n" for line in before)
    else:
        assert content == "".join(f"{line}\n" for line in after)
