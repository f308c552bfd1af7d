"""W5 MCP Python SDK: N `MCPServer.call_tool` calls gathered in process (server side).

    bench/.venvs/mcp/bin/python bench/core/w5_mcp.py [repetitions] [sizes]

The MCP SDK has no batch executor: a client sends one `tools/call` request per call and
the server's session runs each request in its own task. What is timed is that server
work without the transport: `json.loads` of the arguments (the JSON-RPC layer's job)
and `call_tool` (validation with the tool's argument model, the call, the conversion of
the result to content blocks), N of them under one `asyncio.gather`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from w5_harness import (
    ARGUMENTS,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    Batch,
    Variant,
    nap,
    run_variants,
    timed,
)


async def build() -> Sequence[Variant]:
    server = MCPServer("bench")
    server.add_tool(nap, name=TOOL_NAME, description=TOOL_DESCRIPTION)

    async def make(size: int) -> Batch:
        async def run() -> Sequence[Any]:
            return await asyncio.gather(
                *(server.call_tool(TOOL_NAME, json.loads(ARGUMENTS)) for _ in range(size))
            )

        return timed(run)

    return [Variant("gather of MCPServer.call_tool", make)]


if __name__ == "__main__":
    run_variants("mcp", "MCP SDK", build, ["mcp", "pydantic", "pydantic-core"])
