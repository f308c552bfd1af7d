"""Shared test fixtures. Area-specific fixtures live in each test folder's conftest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from toolbridge import ToolContext

# Property tests outside tests/fuzz: the same examples on every CI run (CI=true), so a
# landing is never refused by a rare draw; local runs stay random and explore.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh, real workspace directory."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def context(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)
