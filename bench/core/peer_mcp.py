"""MCP Python SDK: the server's `MCPServer.call_tool` (formerly FastMCP), in process.

No transport: the arguments are decoded with `json.loads` (what the JSON-RPC layer
does for a real request) and handed to `call_tool`, which validates them with the
tool's pydantic argument model, runs the tool and converts the result. Unknown tools
and invalid arguments raise `ToolError`; the protocol layer turns it into
`CallToolResult(isError=True)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typed_tools
from harness import Case, excerpt, run_cases
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from workloads import ALL_WORKLOADS, FILLER_NAMES


def describe(result: Any) -> tuple[str, str]:
    if isinstance(result, ToolError):
        return "error", excerpt(result)
    if getattr(result, "is_error", False):
        return "error", excerpt(result)
    texts = [getattr(block, "text", "") for block in getattr(result, "content", [])]
    return "ok", excerpt(" ".join(texts) or result)


async def build() -> Sequence[Case]:
    server = MCPServer("bench")
    server.add_tool(typed_tools.add)
    server.add_tool(typed_tools.add_sync)
    server.add_tool(typed_tools.schedule_meeting)
    for name in FILLER_NAMES:
        server.add_tool(typed_tools.make_filler(name), name=name)

    cases: list[Case] = []
    for workload in ALL_WORKLOADS:

        async def call(name: str = workload.tool_name, text: str = workload.arguments) -> Any:
            try:
                return await server.call_tool(name, json.loads(text))
            except ToolError as exc:
                return exc

        cases.append(Case(workload.key, "MCPServer.call_tool", call, describe))
    return cases


if __name__ == "__main__":
    run_cases("mcp", "MCP SDK server call_tool", build, ["mcp", "pydantic", "pydantic-core"])
