"""Tools the MCP server tests serve: typed returns, a slow one, progress, approval, failure.

Imported by the tests (in-process HTTP server) and run as a script for stdio:
``python served_tools.py stdio WORKSPACE`` or ``python served_tools.py http WORKSPACE PORTFILE``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pydantic import BaseModel

from toolbridge import ToolContext, ToolExecutionError, ToolRegistry, tool
from toolbridge.execution.progress import report_progress


class Weather(BaseModel):
    city: str
    celsius: float


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
def weather(city: str) -> Weather:
    """The weather in a city (always mild)."""
    return Weather(city=city, celsius=21.5)


@tool
async def slow(seconds: float, marker: str) -> str:
    """Sleep; the marker file says 'started', then 'cancelled' if the call is cancelled."""
    Path(marker).write_text("started")  # noqa: ASYNC240
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")  # noqa: ASYNC240  (tiny, and must not await)
        raise
    return "done"


@tool
async def steps(n: int) -> str:
    """Report progress n times."""
    for i in range(n):
        report_progress(i + 1, n, f"step {i + 1}")
        await asyncio.sleep(0.01)
    return f"{n} steps"


@tool
def steps_sync(n: int) -> str:
    """Report progress n times, from a worker thread (a sync tool)."""
    for i in range(n):
        report_progress(i + 1, n, f"step {i + 1}")
    return f"{n} steps"


@tool(requires_approval=True)
def drop_table(table: str) -> str:
    """Drop a table (needs the user's approval)."""
    return f"dropped {table}"


@tool
def fail(message: str) -> str:
    """Always fails with `message`."""
    raise ToolExecutionError(message, hint="This tool always fails.")


def build_registry(workspace: Path) -> ToolRegistry:
    tools = [add, weather, slow, steps, steps_sync, drop_table, fail]
    return ToolRegistry(tools, context=ToolContext(workspace=workspace))


def main() -> None:
    from toolbridge.mcp import MCPToolServer

    mode, workspace = sys.argv[1], Path(sys.argv[2])
    server = MCPToolServer(build_registry(workspace))
    if mode == "stdio":
        asyncio.run(server.run_stdio())
    else:
        port_file = Path(sys.argv[3])
        asyncio.run(server.run_http("127.0.0.1", 0, ready=lambda p: port_file.write_text(str(p))))


if __name__ == "__main__":
    main()
