"""`toolbridge mcp serve --http` as a real process, for the tests that talk to it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any


@asynccontextmanager
async def served_over_http(parts: Any, workspace: Path, *options: str) -> AsyncIterator[str]:
    """The server on a free port of 127.0.0.1 (with `options`, e.g. a token); yields the
    URL it says it serves on, and stops it after."""
    command = parts.toolbridge(workspace, "--http", "127.0.0.1:0", *options)
    process = await asyncio.create_subprocess_exec(
        command["command"], *command["args"], stderr=asyncio.subprocess.PIPE
    )
    try:
        assert process.stderr is not None
        async with asyncio.timeout(60):
            line = (await process.stderr.readline()).decode()
        match = re.search(r"serving MCP on (http://127\.0\.0\.1:\d+/mcp)", line)
        assert match, line
        yield match.group(1)
    finally:
        process.terminate()
        await process.wait()
