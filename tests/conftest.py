"""Shared test fixtures. Area-specific fixtures live in each test folder's conftest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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

# `make test` runs the suite in two pytest-xdist workers (--dist loadgroup). Tests that
# share one costly runtime run in one worker, so that runtime starts once per run and never
# twice side by side: the Ray backend tests share a local Ray node (a session fixture) and a
# Ray backend per file (module fixtures). Grouped here by path, in the scheduler, because
# an `xdist_group` mark added at collection is lost under pytest 9.2 (pytest-xdist #1386).
# A test that must not run beside another of its kind goes in a group here too.
SHARED_RUNTIME = {"tests/backends/": "ray"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadgroup, with the groups of SHARED_RUNTIME (the largest unit goes first)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SharedRuntimeScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for prefix, group in SHARED_RUNTIME.items():
                if nodeid.startswith(prefix):
                    return group
            return str(super()._split_scope(nodeid))

    return SharedRuntimeScheduling(config, log)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh, real workspace directory."""
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def context(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)
