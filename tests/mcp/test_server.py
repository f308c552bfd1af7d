"""MCPToolServer driven by the official SDK's client (stdio and streamable HTTP) and by the
MCP Inspector's command-line mode; and toolbridge serving toolbridge (a round trip)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolbridge import (
    ErrorKind,
    EventType,
    ExecutionPolicy,
    JsonBlock,
    OutcomeStatus,
    ToolCallRequest,
    ToolEvent,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.mcp import MCPClient, MCPToolsChanged, MCPToolServer


def _stdio(parts: Any, workspace: Path) -> StdioServerParameters:
    served = parts.served(workspace)
    return StdioServerParameters(command=served["command"], args=served["args"])


@asynccontextmanager
async def _http_server(
    registry: ToolRegistry, token: str | None = None
) -> AsyncIterator[tuple[MCPToolServer, str]]:
    server = MCPToolServer(registry)
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(server.run_http("127.0.0.1", 0, token=token, ready=bound.set_result))
    try:
        port = await asyncio.wait_for(asyncio.shield(bound), 30)
        yield server, f"http://127.0.0.1:{port}/mcp"
    finally:
        task.cancel()
        await asyncio.wait([task])


def _text(result: mt.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, mt.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_over_stdio(parts: Any, workspace: Path, mode: str) -> None:
    async with Client(_stdio(parts, workspace), mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert sorted(listed) == [
            *(
                "add",
                "drop_table",
                "fail",
                "read_tool_result",
                "slow",
                "steps",
                "steps_sync",
                "weather",
            )
        ]  # read_tool_result: the pager of long results, which the server keeps
        add = listed["add"]
        assert add.annotations is not None and add.annotations.read_only_hint is True
        assert add.input_schema["required"] == ["a", "b"]
        assert add.output_schema == {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
        }
        drop = listed["drop_table"]
        assert drop.annotations is not None and drop.annotations.destructive_hint is True
        assert listed["weather"].output_schema is not None
        assert listed["weather"].output_schema["properties"]["celsius"]["type"] == "number"

        # casting and validation are toolbridge's: "2" becomes 2
        summed = await client.call_tool("add", {"a": "2", "b": 3})
        assert not summed.is_error
        assert _text(summed) == "5"
        assert summed.structured_content == {"result": 5}

        weather = await client.call_tool("weather", {"city": "Oslo"})
        assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
        assert json.loads(_text(weather)) == weather.structured_content

        failed = await client.call_tool("fail", {"message": "disk on fire"})
        assert failed.is_error
        assert _text(failed).startswith("Error: disk on fire")
        assert failed.meta is not None and failed.meta["toolbridge/error_kind"] == "execution_error"

        invalid = await client.call_tool("add", {"a": "two", "b": 3})
        assert invalid.is_error and "invalid arguments for 'add'" in _text(invalid)

        unknown = await client.call_tool("ad", {})
        assert unknown.is_error and "Did you mean 'add'" in _text(unknown)


async def test_progress_and_cancellation_over_stdio(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    marker = tmp_path / "marker"
    async with Client(_stdio(parts, workspace), mode="legacy") as client:
        done = await client.call_tool("steps", {"n": 3}, progress_callback=on_progress)
        assert _text(done) == "3 steps"
        assert reports == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        # A sync tool reports from its worker thread: relayed all the same, in order.
        done = await client.call_tool("steps_sync", {"n": 3}, progress_callback=on_progress)
        assert _text(done) == "3 steps"
        assert reports[3:] == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]

        call = asyncio.create_task(client.call_tool("slow", {"seconds": 60, "marker": str(marker)}))
        await parts.eventually(marker.exists)  # the call is running on the server
        call.cancel()
        await asyncio.wait([call])
        await parts.eventually(lambda: marker.read_text() == "cancelled")
        assert marker.read_text() == "cancelled"  # notifications/cancelled cancelled the tool
        assert _text(await client.call_tool("add", {"a": 1, "b": 1})) == "2"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approval_through_elicitation(parts: Any, workspace: Path, mode: str) -> None:
    answers: list[str] = []

    async def elicit(context: Any, params: Any) -> mt.ElicitResult:
        answers.append(params.message)
        action = "accept" if len(answers) == 1 else "decline"
        return mt.ElicitResult(
            action=action, content={"approve": True} if action == "accept" else None
        )

    async with Client(_stdio(parts, workspace), mode=mode, elicitation_callback=elicit) as client:
        approved = await client.call_tool("drop_table", {"table": "users"})
        assert not approved.is_error and _text(approved) == "dropped users"
        assert "drop_table" in answers[0] and '"users"' in answers[0]
        declined = await client.call_tool("drop_table", {"table": "orders"})
        assert declined.is_error
        assert "the user denied the call to 'drop_table'" in _text(declined)

    async with Client(_stdio(parts, workspace), mode=mode) as client:
        refused = await client.call_tool("drop_table", {"table": "users"})
        assert refused.is_error
        assert "does not support elicitation" in _text(refused)
        assert "not run" in _text(refused)


async def test_streamable_http_with_a_bearer_token_and_list_changed(
    served_tools: ModuleType, workspace: Path, parts: Any
) -> None:
    registry = served_tools.build_registry(workspace)
    notifications: list[Any] = []

    async def on_message(message: Any) -> None:
        notifications.append(message)

    async with _http_server(registry, token="s3cret") as (server, url):
        async with create_mcp_http_client(headers={"Authorization": "Bearer s3cret"}) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="legacy", message_handler=on_message) as client:
                summed = await client.call_tool("add", {"a": 20, "b": 22})
                assert summed.structured_content == {"result": 42}

                @tool(read_only=True)
                def late(text: str) -> str:
                    """Registered while clients are connected."""
                    return text.upper()

                registry.register(late)
                await server.tools_changed()
                await parts.eventually(
                    lambda: any(
                        isinstance(n, mt.ToolListChangedNotification) for n in notifications
                    )
                )
                names = [t.name for t in (await client.list_tools()).tools]
                assert "late" in names
                assert _text(await client.call_tool("late", {"text": "hi"})) == "HI"

        async with httpx.AsyncClient() as http:
            refused = await http.post(url, json={}, headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")


async def _inspector(parts: Any, *args: str) -> Any:
    process = await asyncio.create_subprocess_exec(
        parts.inspector(),
        "--cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return json.loads(out)


async def test_mcp_inspector_cli_over_stdio_and_http(
    parts: Any, workspace: Path, served_tools: ModuleType
) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\n")
    command = parts.toolbridge(workspace)
    listed = await _inspector(parts, command["command"], *command["args"], "--method", "tools/list")
    names = [t["name"] for t in listed["tools"]]
    assert "read_file" in names and names == sorted(names)
    read = await _inspector(
        parts,
        command["command"],
        *command["args"],
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        "path=notes.txt",
    )
    assert read["isError"] is False and "two" in read["content"][0]["text"]

    async with _http_server(served_tools.build_registry(workspace)) as (_server, url):
        called = await _inspector(
            parts,
            url,
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
            "weather",
            "--tool-arg",
            "city=Rome",
        )
    assert called["structuredContent"] == {"city": "Rome", "celsius": 21.5}


async def test_round_trip_toolbridge_serving_toolbridge(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    registry = ToolRegistry()
    config = {"mcpServers": {"tb": parts.served(workspace), "files": parts.toolbridge(workspace)}}
    events: list[ToolEvent] = []
    async with MCPClient(config, registry):
        executor = ToolExecutor(registry, listeners=[events.append])
        marker = tmp_path / "marker"
        async with asyncio.timeout(60):  # a hang guard for calls that must succeed
            weather, steps, outside = await executor.run(
                [
                    ToolCallRequest("1", "mcp_tb_weather", {"city": "Lima"}),
                    ToolCallRequest("2", "mcp_tb_steps", {"n": 2}),
                    ToolCallRequest("3", "mcp_files_read_file", {"path": "../../etc/passwd"}),
                ]
            )
        assert weather.result.content == [JsonBlock({"city": "Lima", "celsius": 21.5})]
        assert steps.result.text == "2 steps"
        progress = [e.progress for e in events if e.type is EventType.CALL_PROGRESS]
        assert [(p.progress, p.total) for p in progress if p is not None] == [(1, 2), (2, 2)]
        # the server's error kind survives the hop
        assert outside.kind is ErrorKind.WORKSPACE_VIOLATION
        # a toolbridge timeout sends notifications/cancelled: the served tool is cancelled.
        # The limit this call trips is its own, and long enough for the call to reach the
        # served tool first on a busy machine.
        timed = ToolExecutor(registry, ExecutionPolicy(default_timeout=10.0))
        (slow,) = await timed.run(
            [ToolCallRequest("4", "mcp_tb_slow", {"seconds": 300, "marker": str(marker)})]
        )
        assert slow.kind is ErrorKind.TIMEOUT
        await parts.eventually(lambda: marker.read_text() == "cancelled")
        # destructiveHint from the served flags: approval on this side too
        (pending,) = await executor.run([ToolCallRequest("5", "mcp_tb_drop_table", {"table": "t"})])
        assert pending.status is OutcomeStatus.PENDING_APPROVAL


async def test_round_trip_list_changed_over_http(
    served_tools: ModuleType, workspace: Path, parts: Any
) -> None:
    served = served_tools.build_registry(workspace)
    registry = ToolRegistry()
    changes: list[MCPToolsChanged] = []
    async with (
        _http_server(served) as (_server, url),
        MCPClient({"mcpServers": {"tb": {"url": url}}}, registry, listeners=[changes.append]),
    ):
        before = registry.definitions_hash
        assert "mcp_tb_add" in registry and "mcp_tb_late" not in registry

        @tool(read_only=True)
        def late(text: str) -> str:
            """Registered while clients are connected."""
            return text[::-1]

        served.register(late)  # the server notices by itself: no tools_changed() call
        await parts.eventually(lambda: "mcp_tb_late" in registry)
        assert registry.definitions_hash != before
        assert changes[-1].added == ("mcp_tb_late",)
        assert changes[-1].definitions_hash == registry.definitions_hash
        (outcome,) = await ToolExecutor(registry).run(
            [ToolCallRequest("1", "mcp_tb_late", {"text": "abc"})]
        )
        assert outcome.result.text == "cba"


async def test_gateway_serves_another_servers_tools(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"time": parts.time()}}))
    command = parts.toolbridge(workspace, "--servers", str(config))
    params = StdioServerParameters(command=command["command"], args=command["args"])
    async with Client(stdio_client(params), mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "mcp_time_get_current_time" in listed and "read_file" in listed
        assert listed["mcp_time_get_current_time"].output_schema is not None
        result = await client.call_tool("mcp_time_get_current_time", {"timezone": "Asia/Tokyo"})
        assert not result.is_error
        assert result.structured_content is not None
        assert result.structured_content["timezone"] == "Asia/Tokyo"


async def test_client_config_headers_reach_a_token_protected_server(
    served_tools: ModuleType, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TB_TEST_TOKEN", "s3cret")
    registry = ToolRegistry()
    async with _http_server(served_tools.build_registry(workspace), token="s3cret") as (_s, url):
        right = {"url": url, "headers": {"Authorization": "Bearer ${TB_TEST_TOKEN}"}}
        wrong = {"url": url, "headers": {"Authorization": "Bearer nope"}, "connect_timeout": 10}
        config = {"mcpServers": {"tb": right, "bad": wrong}}
        async with MCPClient(config, registry, backoff=(60, 60)) as client:
            states = {s.name: s.state for s in client.status()}
            assert states == {"tb": "connected", "bad": "disconnected"}
            assert (client.connections["bad"].last_error or "").startswith("HTTP 401 from")
            (outcome,) = await ToolExecutor(registry).run(
                [ToolCallRequest("1", "mcp_tb_add", {"a": 2, "b": 2})]
            )
            assert outcome.result.text == "4"
