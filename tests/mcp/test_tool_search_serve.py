"""``toolbridge mcp serve --tool-search`` driven by the official SDK client over stdio (a
real server process): two tools listed, ``call_tool`` held to every rule of a direct
call; and a per-server ``defer_loading`` in the MCP config, with a real MCP server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters

from toolbridge import ToolConfigError, ToolRegistry, tool
from toolbridge.core.tool_search import DeferralPolicy, ToolDeferral
from toolbridge.mcp import MCPClient, MCPToolServer
from toolbridge.mcp.config import load_mcp_config


def _text(result: mt.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, mt.TextContent))


def _serve(parts: Any, workspace: Path, *extra: str) -> StdioServerParameters:
    served = parts.toolbridge(workspace, *extra)
    return StdioServerParameters(command=served["command"], args=served["args"])


async def test_serve_tool_search_lists_two_tools_and_call_tool_runs_as_a_direct_call(
    parts: Any, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"approve": True})

    config = workspace.parent / "writes.toml"
    config.write_text('[executor]\napproval = "writes"\n')  # writing a file needs approval
    params = _serve(parts, workspace, "--tool-search", "-c", str(config))
    async with Client(params, mode="legacy", elicitation_callback=elicit) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["search_tools", "call_tool"]

        found = await client.call_tool("search_tools", {"query": "read a text file", "limit": 3})
        assert not found.is_error
        tools = json.loads(_text(found))["tools"]
        assert tools[0]["name"] == "read_file"
        assert tools[0]["inputSchema"]["properties"]["offset"]["type"] == "integer"
        regex = await client.call_tool("search_tools", {"query": "^(glob|grep)$"})
        assert [t["name"] for t in json.loads(_text(regex))["tools"]] == ["glob", "grep"]

        # casting: "2" where the schema wants an integer, as for a direct call
        read = await client.call_tool(
            "call_tool", {"name": "read_file", "arguments": {"path": "notes.txt", "offset": "2"}}
        )
        direct = await client.call_tool("read_file", {"path": "notes.txt", "offset": 2})
        assert not read.is_error and _text(read) == _text(direct)
        assert "two" in _text(read) and "one" not in _text(read)

        # the workspace guard
        outside = await client.call_tool(
            "call_tool", {"name": "read_file", "arguments": {"path": "../../etc/passwd"}}
        )
        assert outside.is_error and "outside the workspace" in _text(outside)
        again = await client.call_tool("read_file", {"path": "../../etc/passwd"})
        assert _text(again).startswith(_text(outside))  # the same refusal, and the guard
        assert "refused 2 times" in _text(again)  # counted both: one executor for both ways

        # approval: asked through elicitation, for the tool itself
        wrote = await client.call_tool(
            "call_tool", {"name": "write_file", "arguments": {"path": "new.txt", "content": "hi"}}
        )
        assert not wrote.is_error, _text(wrote)
        assert (workspace / "new.txt").read_text() == "hi"
        assert len(asked) == 1 and "'write_file'" in asked[0]

        nameless = await client.call_tool("call_tool", {"arguments": {}})
        assert nameless.is_error and "call_tool needs 'name'" in _text(nameless)
        unknown = await client.call_tool("call_tool", {"name": "read_fil", "arguments": {}})
        assert unknown.is_error and "Did you mean 'read_file'" in _text(unknown)
        nothing = await client.call_tool("search_tools", {"query": "zzqqxx"})
        assert "No tool matches 'zzqqxx'" in _text(nothing)


async def test_call_tool_without_elicitation_is_refused_as_a_direct_call(
    parts: Any, workspace: Path
) -> None:
    config = workspace.parent / "writes.toml"
    config.write_text('[executor]\napproval = "writes"\n')
    params = _serve(parts, workspace, "--tool-search", "-c", str(config))
    async with Client(params, mode="legacy") as client:
        refused = await client.call_tool(
            "call_tool", {"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}
        )
        assert refused.is_error and "does not support elicitation" in _text(refused)
        assert not (workspace / "x.txt").exists()


def test_a_registry_tool_named_like_the_search_tools_is_refused() -> None:
    @tool
    def call_tool(name: str) -> str:
        """Collides."""
        return name

    with pytest.raises(ToolConfigError, match="serves its own 'call_tool'"):
        MCPToolServer(ToolRegistry([call_tool]), tool_search=True)
    MCPToolServer(ToolRegistry([call_tool]))  # without tool search it is an ordinary name


def _time_config(parts: Any, value: Any) -> dict[str, Any]:
    return {"mcpServers": {"time": {**parts.time(), "defer_loading": value}}}


@tool
def small_talk(text: str) -> str:
    """Say something."""
    return text


async def test_per_server_defer_loading_marks_its_tools(parts: Any) -> None:
    registry = ToolRegistry([small_talk])
    async with MCPClient(_time_config(parts, True), registry):
        deferral = ToolDeferral(registry, DeferralPolicy())  # 3 tools: under the size
        assert deferral.deferred == {"mcp_time_convert_time", "mcp_time_get_current_time"}
        assert deferral.select().names == ["small_talk", "tool_search"]

    registry = ToolRegistry([small_talk])
    async with MCPClient(_time_config(parts, False), registry):
        deferral = ToolDeferral(registry, DeferralPolicy(max_tools=0))  # over the size
        assert deferral.deferred == {"small_talk"}
        assert "mcp_time_get_current_time" in deferral.select().names


def test_a_defer_loading_that_is_not_a_flag_is_a_clear_error() -> None:
    with pytest.raises(ToolConfigError, match="'defer_loading' must be true or false"):
        load_mcp_config({"mcpServers": {"a": {"command": "x", "defer_loading": "yes"}}})
    (config,) = load_mcp_config({"mcpServers": {"a": {"command": "x"}}})
    assert config.defer_loading is None
