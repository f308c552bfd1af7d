"""Two MCP clients of one `toolbridge mcp serve` over HTTP: each gets its own context session,
so neither sees, polls or kills the other's exec sessions, nor shares its sandbox's /tmp."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import mcp_types as mt
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolbridge import ToolContext, ToolRegistry
from toolbridge.mcp import MCPToolServer
from toolbridge.tools.shell import ExecConfig, ExecTool

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


@asynccontextmanager
async def _served(workspace: Path) -> AsyncIterator[str]:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    registry = ToolRegistry([tool, *tool.companions()], context=ToolContext(workspace))
    server = MCPToolServer(registry)
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.run_http("127.0.0.1", 0, ready=bound.set_result))
    try:
        port = await asyncio.wait_for(asyncio.shield(bound), 30)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        task.cancel()
        await asyncio.wait([task])
        tool.close()


def _text(result: mt.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, mt.TextContent))


async def test_two_http_clients_never_see_or_drive_each_others_sessions(workspace: Path) -> None:
    async with _served(workspace) as url, AsyncExitStack() as stack:
        clients = []
        for _ in range(2):
            http = await stack.enter_async_context(create_mcp_http_client())
            transport = streamable_http_client(url, http_client=http)
            clients.append(await stack.enter_async_context(Client(transport, mode="legacy")))
        a, b = clients

        started = await a.call_tool(
            "exec", {"command": "echo from-a > /tmp/left-by-a; cat", "yield_time_ms": 0}
        )
        assert "still running: session_id 1" in _text(started), _text(started)

        assert _text(await b.call_tool("list_exec_sessions", {})) == "No exec sessions."
        for arguments in ({"session_id": 1}, {"session_id": 1, "terminate": True}):
            refused = await b.call_tool("write_stdin", arguments)
            assert refused.is_error and "there is no exec session 1" in _text(refused)
        peek = await b.call_tool("exec", {"command": "cat /tmp/left-by-a"})
        assert "No such file" in _text(peek), _text(peek)

        # A's session still runs, and answers A.
        listed = await a.call_tool("list_exec_sessions", {})
        assert "session_id 1:" in _text(listed) and "running" in _text(listed)
        answer = await a.call_tool(
            "write_stdin", {"session_id": 1, "chars": "ping\n", "wait_for": "ping"}
        )
        assert "ping" in _text(answer) and "still running" in _text(answer), _text(answer)
        seen = await a.call_tool("exec", {"command": "cat /tmp/left-by-a"})
        assert "from-a" in _text(seen)
        ended = await a.call_tool("write_stdin", {"session_id": 1, "terminate": True})
        assert "Exit code:" in _text(ended)
