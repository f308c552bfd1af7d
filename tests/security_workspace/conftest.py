"""Fixtures for the workspace guard: a workspace, a guard over it, and a directory outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge.security.workspace import Workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace holding a secret the guard must never reveal."""
    root = tmp_path / "outside"
    root.mkdir()
    (root / "secret.txt").write_text("OUTSIDE-SECRET\n")
    return root


@pytest.fixture
def guard(workspace: Path) -> Workspace:
    return Workspace(workspace)
