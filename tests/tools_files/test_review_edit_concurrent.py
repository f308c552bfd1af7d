"""Review: edit_file called many times at once on one file (an MCP server, a shared tool)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolbridge import ToolContext, ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import EditFileTool


async def test_concurrent_edits_lose_no_edit_they_report_done(workspace: Path) -> None:
    """Two edits at once both read the same text; the second write dropped the first
    (16 reported done, 5 were in the file)."""
    registry = ToolRegistry(
        [EditFileTool(Workspace(workspace))], context=ToolContext(workspace=workspace)
    )
    (workspace / "s.txt").write_text("seed\n")
    count = 16
    results = await asyncio.gather(
        *(
            registry.execute(
                "edit_file",
                {"path": "s.txt", "old_string": "seed\n", "new_string": f"seed\nn{i:02d}\n"},
            )
            for i in range(count)
        )
    )
    done = [i for i, result in enumerate(results) if not result.is_error]
    lines = (workspace / "s.txt").read_text().splitlines()
    assert sorted(lines[1:]) == [f"n{i:02d}" for i in done]
    assert len(done) == count
