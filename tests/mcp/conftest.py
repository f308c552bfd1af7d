"""Fixtures for the MCP tests: real servers (PyPI and npm), located or the test FAILS.

The third-party servers come from the dev extras (``mcp-server-time``, ``mcp-server-git``)
and from ``npm ci`` in this folder (``@modelcontextprotocol/server-everything`` and the
MCP Inspector); `.ci/run` installs both. Nothing is downloaded at test time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HERE = Path(__file__).parent
NODE_MODULES = HERE / "node_modules"
BIN = Path(sys.executable).parent


def _require(path: Path, how: str) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: {how}", pytrace=False)
    return path


def python_server(name: str) -> str:
    """A console script of the dev extras (mcp-server-time, mcp-server-git, toolbridge)."""
    return str(_require(BIN / name, "install the dev extras: pip install -e '.[dev]'"))


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not on PATH: the MCP tests need Node 20+", pytrace=False)
    return found


def everything_args() -> list[str]:
    """``node`` arguments that start @modelcontextprotocol/server-everything over stdio."""
    script = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return [str(_require(script, "run `npm ci` in tests/mcp (.ci/run does)"))]


def inspector() -> str:
    return str(
        _require(
            NODE_MODULES / ".bin" / "mcp-inspector", "run `npm ci` in tests/mcp (.ci/run does)"
        )
    )


def load_served_tools() -> ModuleType:
    """tests/mcp/served_tools.py as a module (the tests run with --import-mode=importlib)."""
    name = "toolbridge_test_served_tools"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "served_tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


SERVED_TOOLS = HERE / "served_tools.py"


async def eventually(check: Callable[[], Any]) -> None:
    """Wait until `check()` is true (30 s: a bound against hangs, not a timing assertion)."""
    async with asyncio.timeout(30):
        while True:
            value = check()
            if isinstance(value, Awaitable):
                value = await value
            if value:
                return
            await asyncio.sleep(0.02)


class Parts:
    """The real parts the tests run, as commands and config entries."""

    @staticmethod
    def python_server(name: str) -> str:
        return python_server(name)

    @staticmethod
    def time() -> dict[str, Any]:
        return {"command": python_server("mcp-server-time")}

    @staticmethod
    def git() -> dict[str, Any]:
        return {"command": python_server("mcp-server-git")}

    @staticmethod
    def everything() -> dict[str, Any]:
        return {"command": node(), "args": everything_args()}

    @staticmethod
    def toolbridge(workspace: Path, *extra: str) -> dict[str, Any]:
        return {
            "command": python_server("toolbridge"),
            "args": ["mcp", "serve", "-w", str(workspace), *extra],
        }

    @staticmethod
    def served(workspace: Path) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(SERVED_TOOLS), "stdio", str(workspace)]}

    node = staticmethod(node)
    inspector = staticmethod(inspector)
    eventually = staticmethod(eventually)


@pytest.fixture
def parts() -> type[Parts]:
    return Parts


@pytest.fixture
def served_tools() -> ModuleType:
    return load_served_tools()
