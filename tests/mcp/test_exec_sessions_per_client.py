"""Two MCP clients of one `toolbridge mcp serve` over HTTP: each gets its own context session,
so neither sees, polls or kills the other's exec sessions, nor shares its sandbox's /tmp."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests.mcp.http_process import served_over_http

from toolbridge import Tool, ToolContext, ToolRegistry
from toolbridge.mcp import MCPToolServer
from toolbridge.tools.shell import ExecConfig, ExecTool

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


class _FailsToEndSessions(Tool):
    """A tool whose `end_session` fails (a plugin's bug)."""

    name = "fails_to_end_sessions"
    description = "Does nothing; fails to end a context session."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def execute(self, **kwargs: Any) -> str:
        return "nothing"

    async def end_session(self, session: str) -> bool:
        raise RuntimeError("a plugin's bug")


@asynccontextmanager
async def _served(workspace: Path, *others: Tool) -> AsyncIterator[str]:
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    registry = ToolRegistry([*others, tool, *tool.companions()], context=ToolContext(workspace))
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


def _running(token: str) -> bool:
    """Whether a live process's command line holds `token`."""
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    return True
        except OSError:
            continue
    return False


async def test_clients_of_the_2026_protocol_share_nothing_unless_they_send_one_key(
    parts: Any, workspace: Path
) -> None:
    # The 2026 protocol has no MCP session: a client's requests share a context session
    # only through the key it sends in _meta; a request without one has its own.
    async with served_over_http(parts, workspace) as url, AsyncExitStack() as stack:

        async def client(key: str | None) -> tuple[Client, dict[str, Any] | None]:
            http = await stack.enter_async_context(create_mcp_http_client())
            transport = streamable_http_client(url, http_client=http)
            opened = await stack.enter_async_context(Client(transport, mode="2026-07-28"))
            return opened, None if key is None else {"toolbridge/session": key}

        a, b = await client(uuid.uuid4().hex), await client(uuid.uuid4().hex)
        c = await client(None)

        async def call(who: tuple[Client, dict[str, Any] | None], name: str, **args: Any) -> str:
            return _text(await who[0].call_tool(name, args, meta=who[1]))  # type: ignore[arg-type]

        started = await call(
            a, "exec", command="echo from-a > /tmp/left-by-a; cat", yield_time_ms=0
        )
        assert "still running: session_id 1" in started, started
        assert await call(b, "list_exec_sessions") == "No exec sessions."
        assert "there is no exec session 1" in await call(b, "write_stdin", session_id=1)
        assert "No such file" in await call(b, "exec", command="cat /tmp/left-by-a")

        # A's next requests, with its key, reach its session and its sandbox.
        answer = await call(a, "write_stdin", session_id=1, chars="ping\n", wait_for="ping")
        assert "ping" in answer and "still running" in answer, answer
        assert "from-a" in await call(a, "exec", command="cat /tmp/left-by-a")

        # Without a key, what a request leaves running ends with it.
        token = f"{300 + uuid.uuid4().int % 100000 / 1000000:.6f}"
        left = await call(
            c, "exec", command=f"echo > /tmp/left-by-c; sleep {token}", yield_time_ms=0
        )
        assert "still running" in left, left
        assert "has ended with its request" in left and "toolbridge/session" in left, left
        assert not _running(token)  # ended before the request was answered
        assert await call(c, "list_exec_sessions") == "No exec sessions."
        assert "No such file" in await call(c, "exec", command="cat /tmp/left-by-c")
        assert "No such file" in await call(a, "exec", command="cat /tmp/left-by-c")
        assert "Exit code:" in await call(a, "write_stdin", session_id=1, terminate=True)


async def test_a_tool_failing_to_end_a_request_s_session_leaves_the_others_ending_theirs(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A keyless request's context session ends with it, in every tool. One tool failing at
    # that (tried first) made its error the request's answer, and the exec command the
    # request left was never ended.
    async with _served(workspace, _FailsToEndSessions()) as url, AsyncExitStack() as stack:
        http = await stack.enter_async_context(create_mcp_http_client())
        transport = streamable_http_client(url, http_client=http)
        client = await stack.enter_async_context(Client(transport, mode="2026-07-28"))
        token = f"{300 + uuid.uuid4().int % 100000 / 1000000:.6f}"
        left = await client.call_tool("exec", {"command": f"sleep {token}", "yield_time_ms": 0})
        assert not left.is_error, _text(left)
        assert "has ended with its request" in _text(left), _text(left)
        assert not _running(token)
    assert "could not end context session" in caplog.text
