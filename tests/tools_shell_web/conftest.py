"""Fixtures of the exec and web_fetch tests: real local HTTP servers (shared helper)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest


def load_local_http() -> Any:
    """The `local_http` helper of tests/security_network (test folders are not packages)."""
    name = "toolbridge_tests_local_http"
    if name not in sys.modules:
        path = Path(__file__).parents[1] / "security_network" / "local_http.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
async def servers() -> AsyncIterator[Any]:
    async for make in load_local_http().running_servers():
        yield make


@pytest.fixture
def local_http() -> Any:
    """The helper module, for its `Reply` type."""
    return load_local_http()
