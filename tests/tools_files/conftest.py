"""Fixtures for the file tools: a registry holding them over a real workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge import ToolContext, ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool
from toolbridge.tools.search import GlobTool, GrepTool


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    root = tmp_path / "outside"
    root.mkdir()
    (root / "secret.txt").write_text("OUTSIDE-SECRET\n")
    return root


@pytest.fixture
def registry(workspace: Path) -> ToolRegistry:
    guard = Workspace(workspace)
    context = ToolContext(workspace=workspace)
    tools = [
        ReadFileTool(guard),
        WriteFileTool(guard, locks=context.file_locks),
        EditFileTool(guard, locks=context.file_locks),
        ListDirTool(guard),
        GlobTool(guard),
        GrepTool(guard),
    ]
    return ToolRegistry(tools, context=context)
