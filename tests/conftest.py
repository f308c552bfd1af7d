"""Shared test fixtures. Area-specific fixtures live in each test folder's conftest."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge import ToolContext


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh, real workspace directory."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def context(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)
