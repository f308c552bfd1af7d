"""Shared test fixtures. Area-specific fixtures live in each test folder's conftest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from toolbridge import ToolContext

# Property tests outside tests/fuzz never have a per-example deadline: on a busy 2-core
# machine an example that spawns a process or a sandbox takes seconds, and Hypothesis's
# 200 ms default turned that load into a red test. A real hang is caught by pytest-timeout.
# Under CI (CI=true) every run also draws the same examples, so a landing is never refused
# by a rare draw; local runs stay random and explore.
settings.register_profile("toolbridge", deadline=None)
settings.register_profile("toolbridge-ci", deadline=None, derandomize=True)
settings.load_profile("toolbridge-ci" if os.environ.get("CI") == "true" else "toolbridge")

# `make test` runs the suite in two pytest-xdist workers (--dist loadgroup). A folder whose
# tests share one costly runtime runs all of them in one worker, so the runtime starts once
# per run and never twice side by side: the Ray backend tests share a local Ray node (a
# session fixture) and one Ray backend per file (module fixtures).
SHARED_RUNTIME = {"backends": "ray"}
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0] if item.path.is_relative_to(TESTS) else ""
        if folder in SHARED_RUNTIME:
            item.add_marker(pytest.mark.xdist_group(SHARED_RUNTIME[folder]))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh, real workspace directory."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def context(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)
