"""``toolbridge mcp``: serve over streamable HTTP with a token, and inspect a config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import mcp_types as mt
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests.mcp.http_process import served_over_http


async def test_serve_http_with_a_token(parts: Any, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("hello\n")
    async with served_over_http(parts, workspace, "--token", "t0k3n") as url:
        async with httpx.AsyncClient() as http:
            assert (await http.post(url, json={})).status_code == 401
        headers = {"Authorization": "Bearer t0k3n"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            result = await client.call_tool("read_file", {"path": "hello.txt"})
            assert not result.is_error
            assert isinstance(result.content[0], mt.TextContent)
            assert "hello" in result.content[0].text


async def test_servers_command_lists_tools_and_failures(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {**parts.time(), "trusted": True},
                    "ghost": {"command": str(tmp_path / "missing"), "connect_timeout": 5},
                }
            }
        )
    )
    process = await asyncio.create_subprocess_exec(
        parts.python_server("toolbridge"),
        "mcp",
        "servers",
        str(config),
        "-w",
        str(workspace),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 1  # one server could not be reached
    assert "mcp_time_get_current_time" in out.decode()
    assert "read-only" in out.decode()
    assert "ghost" in err.decode() and "missing" in err.decode()


async def test_a_bad_config_is_a_clear_error(parts: Any, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"x": {"comand": "typo"}}}))
    process = await asyncio.create_subprocess_exec(
        parts.python_server("toolbridge"),
        "mcp",
        "servers",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert "MCP server 'x': unknown key(s) 'comand'" in err.decode()


async def test_serve_refuses_a_token_no_client_can_send(parts: Any, workspace: Path) -> None:
    # An empty token (an unset variable) or one with spaces around it (HTTP trims header
    # values) started a server that refused every client; it is an error at the start.
    # A control character is no header's; bytes that are not UTF-8 (a lone surrogate in
    # Python) ended the command with 'internal error: UnicodeEncodeError'.
    for token in ("", " t0k3n\n", "t0k\x1b[2Jen", "t0k\udcffen"):
        command = parts.toolbridge(workspace, "--http", "127.0.0.1:0", "--token", token)
        process = await asyncio.create_subprocess_exec(
            command["command"],
            *command["args"],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, err = await asyncio.wait_for(process.communicate(), 60)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode == 2, err
        assert "--token" in err.decode() and "no spaces around it" in err.decode()
        assert len(err.decode().splitlines()) == 1 and b"\x1b" not in err
