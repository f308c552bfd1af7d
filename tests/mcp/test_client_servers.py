"""MCPClient against MCP servers nobody here wrote: mcp-server-time, mcp-server-git (PyPI)
and @modelcontextprotocol/server-everything (npm, run with node)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolbridge import (
    ErrorKind,
    EventType,
    ExecutionPolicy,
    ImageBlock,
    JsonBlock,
    OutcomeStatus,
    ToolCallRequest,
    ToolContext,
    ToolEvent,
    ToolExecutor,
    ToolRegistry,
    tool,
)
from toolbridge.mcp import MCPClient, MCPTool, MCPToolsChanged
from toolbridge.mcp.content import CONTENT_KEY, STRUCTURED_KEY


def _registry(workspace: Path) -> ToolRegistry:
    @tool(read_only=True)
    def zeta(text: str) -> str:
        """A built-in-like tool, to check the ordering."""
        return text

    return ToolRegistry([zeta], context=ToolContext(workspace=workspace))


async def _run(registry: ToolRegistry, name: str, arguments: Any, **policy: Any) -> Any:
    executor = ToolExecutor(registry, ExecutionPolicy(**policy))
    return (await executor.run([ToolCallRequest("c1", name, arguments)]))[0]


async def test_time_server_listing_calls_structured_content_and_errors(
    parts: Any, workspace: Path
) -> None:
    registry = _registry(workspace)
    config = {"mcpServers": {"time": {**parts.time(), "trusted": True}}}
    async with MCPClient(config, registry) as client:
        (status,) = client.status()
        assert status.state == "connected"
        # MCP tools sort after the built-ins (invariant 7), each group sorted
        assert registry.tool_names == ["zeta", "mcp_time_convert_time", "mcp_time_get_current_time"]
        current = registry.get("mcp_time_get_current_time")
        assert isinstance(current, MCPTool)
        assert current.remote_name == "get_current_time"
        assert current.read_only and current.concurrency_safe and current.idempotent

        ok = await _run(registry, "mcp_time_get_current_time", '{"timezone": "Europe/Paris"}')
        assert ok.status is OutcomeStatus.OK
        (block,) = ok.result.content
        assert isinstance(block, JsonBlock)
        assert block.value["timezone"] == "Europe/Paris"
        assert ok.result.metadata[STRUCTURED_KEY] == block.value

        # the server's own failure (isError) is a tool error outcome with its message
        bad = await _run(registry, "mcp_time_get_current_time", {"timezone": "Mars/Olympus"})
        assert bad.status is OutcomeStatus.ERROR and bad.kind is ErrorKind.EXECUTION_ERROR
        assert "MCP server 'time' reported that tool 'get_current_time' failed" in bad.result.text
        assert "Mars/Olympus" in bad.result.text

        # toolbridge's own validation runs first: nothing is sent for a bad call
        missing = await _run(registry, "mcp_time_convert_time", {"source_timezone": "UTC"})
        assert missing.kind is ErrorKind.INVALID_ARGUMENTS
        assert "missing required key 'target_timezone'" in missing.result.text
        typo = await _run(registry, "mcp_time_get_current_tme", {})
        assert typo.kind is ErrorKind.UNKNOWN_TOOL
        assert "Did you mean 'mcp_time_get_current_time'" in typo.result.text
    # closing removes the server's tools (the executor added its pager)
    assert registry.tool_names == ["read_tool_result", "zeta"]


async def test_untrusted_annotations_do_not_loosen(parts: Any, workspace: Path) -> None:
    registry = _registry(workspace)
    async with MCPClient({"mcpServers": {"time": parts.time()}}, registry):
        current = registry.get("mcp_time_get_current_time")
        assert current is not None
        assert current.read_only is False and current.concurrency_safe is False


@pytest.fixture
def repository(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace


async def test_git_server_over_a_real_repository(parts: Any, repository: Path) -> None:
    workspace = repository
    (workspace / "new.txt").write_text("x")
    registry = _registry(workspace)
    config = {"mcpServers": {"git": {**parts.git(), "include": ["git_status", "git_log"]}}}
    async with MCPClient(config, registry):
        assert registry.tool_names == ["zeta", "mcp_git_git_log", "mcp_git_git_status"]
        status = await _run(registry, "mcp_git_git_status", {"repo_path": str(workspace)})
        assert status.status is OutcomeStatus.OK, status.result.text
        assert "new.txt" in status.result.text
        not_a_repo = workspace / "plain"
        not_a_repo.mkdir()
        failed = await _run(registry, "mcp_git_git_status", {"repo_path": str(not_a_repo)})
        assert failed.status is OutcomeStatus.ERROR
        assert failed.result.text.startswith("Error: MCP server 'git'")


async def test_everything_server_content_kinds(parts: Any, workspace: Path) -> None:
    registry = _registry(workspace)
    root_uri = workspace.as_uri()
    async with MCPClient({"mcpServers": {"every": parts.everything()}}, registry):
        # a string where the schema wants a number is cast, as for any tool
        total = await _run(registry, "mcp_every_get-sum", '{"a": "40", "b": 2}')
        assert total.status is OutcomeStatus.OK
        assert "42" in total.result.text
        assert [r.action for r in total.repairs] == ["cast"]

        image = await _run(registry, "mcp_every_get-tiny-image", {})
        images = [b for b in image.result.content if isinstance(b, ImageBlock)]
        assert len(images) == 1 and images[0].media_type == "image/png"
        assert images[0].data.startswith(b"\x89PNG")

        structured = await _run(
            registry, "mcp_every_get-structured-content", {"location": "Chicago"}
        )
        assert isinstance(structured.result.content[0], JsonBlock)
        assert "temperature" in structured.result.metadata[STRUCTURED_KEY]

        links = await _run(registry, "mcp_every_get-resource-links", {"count": 2})
        assert links.result.text.count("[resource link:") == 2
        kinds = [item["type"] for item in links.result.metadata[CONTENT_KEY]]
        assert kinds.count("resource_link") == 2

        embedded = await _run(registry, "mcp_every_get-resource-reference", {})
        assert "[resource demo://resource/" in embedded.result.text

        roots = await _run(registry, "mcp_every_get-roots-list", {})
        assert root_uri in roots.result.text  # the workspace is offered as a root


async def test_progress_notifications_become_executor_events(parts: Any, workspace: Path) -> None:
    registry = _registry(workspace)
    events: list[ToolEvent] = []
    async with MCPClient({"mcpServers": {"every": parts.everything()}}, registry):
        executor = ToolExecutor(registry, listeners=[events.append])
        call = ToolCallRequest(
            "p1", "mcp_every_trigger-long-running-operation", {"duration": 0.3, "steps": 3}
        )
        (outcome,) = await executor.run([call])
    assert outcome.status is OutcomeStatus.OK, outcome.result.text
    progress = [e.progress for e in events if e.type is EventType.CALL_PROGRESS]
    assert [(p.progress, p.total) for p in progress if p is not None] == [(1, 3), (2, 3), (3, 3)]
    assert all(e.call is call for e in events)


async def test_a_timeout_cancels_the_request_and_the_server_stays_usable(
    parts: Any, workspace: Path
) -> None:
    registry = _registry(workspace)
    config = {"mcpServers": {"every": {**parts.everything(), "timeout": 0.5}}}
    async with MCPClient(config, registry) as client:
        slow = await _run(
            registry, "mcp_every_trigger-long-running-operation", {"duration": 60, "steps": 2}
        )
        assert slow.kind is ErrorKind.TIMEOUT
        # The same connection answers the next request. Asked without the server's 0.5 s
        # limit, which is the one this test trips, not one a busy machine should.
        async with asyncio.timeout(30):
            again = await client.connections["every"].call("echo", {"message": "still here"})
        assert not again.is_error and "still here" in again.text


async def test_list_changed_refreshes_the_registry(parts: Any, workspace: Path) -> None:
    """server-everything registers its roots/elicitation tools after the handshake and says
    so with notifications/tools/list_changed: the registry must end up with them."""
    registry = _registry(workspace)
    events: list[MCPToolsChanged] = []
    async with MCPClient(
        {"mcpServers": {"every": parts.everything()}}, registry, listeners=[events.append]
    ) as client:
        connection = client.connections["every"]
        await parts.eventually(lambda: connection.listings >= 2)
        assert "mcp_every_get-roots-list" in registry
    assert events[0].server == "every" and "mcp_every_echo" in events[0].added
    assert events[-1].removed  # closing removes them, and says so
    assert events[-1].definitions_hash == registry.definitions_hash


async def test_stdio_environment_is_explicit_and_stderr_is_logged(
    parts: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLBRIDGE_TEST_SECRET", "do-not-leak")
    caplog.set_level(logging.INFO, logger="toolbridge.mcp.client")
    registry = _registry(workspace)
    config = {"mcpServers": {"every": {**parts.everything(), "env": {"GIVEN": "yes"}}}}
    async with MCPClient(config, registry):
        env = await _run(registry, "mcp_every_get-env", {})
    assert '"GIVEN": "yes"' in env.result.text
    assert "PATH" in env.result.text
    assert "TOOLBRIDGE_TEST_SECRET" not in env.result.text
    assert "do-not-leak" not in env.result.text
    assert any("stderr: Starting default (STDIO) server" in r.getMessage() for r in caplog.records)


async def test_a_server_killed_mid_call_fails_clearly_and_reconnects(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    node_command = " ".join([parts.node(), *parts.everything()["args"]])
    killable = {
        "command": "/bin/sh",
        "args": ["-c", f'echo $$ > "{pid_file}"; exec {node_command}'],
    }
    registry = _registry(workspace)
    events: list[ToolEvent] = []
    client = MCPClient(
        {"mcpServers": {"every": killable, "time": parts.time()}}, registry, backoff=(0.1, 0.5)
    )
    async with client:
        connection = client.connections["every"]
        executor = ToolExecutor(registry, listeners=[events.append])
        call = ToolCallRequest(
            "k1", "mcp_every_trigger-long-running-operation", {"duration": 60, "steps": 60}
        )
        running = asyncio.create_task(executor.run([call]))
        await parts.eventually(lambda: any(e.type is EventType.CALL_PROGRESS for e in events))
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        (outcome,) = await asyncio.wait_for(running, 30)
        assert outcome.status is OutcomeStatus.ERROR
        assert "MCP server 'every' closed the connection during the call" in outcome.result.text

        # the other server is unaffected
        other = await _run(registry, "mcp_time_get_current_time", {"timezone": "UTC"})
        assert other.status is OutcomeStatus.OK

        # the tools stay registered, and the server comes back by itself
        assert "mcp_every_echo" in registry
        await asyncio.wait_for(connection.wait_connected(), 30)
        back = await _run(registry, "mcp_every_echo", {"message": "back"})
        assert back.status is OutcomeStatus.OK, back.result.text


async def test_an_unreachable_server_fails_clearly_and_leaves_the_others(
    parts: Any, workspace: Path
) -> None:
    registry = _registry(workspace)
    config = {
        "mcpServers": {
            "ghost": {"command": str(workspace / "no-such-server")},
            "down": {"url": "http://127.0.0.1:9/mcp", "connect_timeout": 5},
            "time": parts.time(),
        }
    }
    async with MCPClient(config, registry, backoff=(5.0, 5.0)) as client:
        states = {s.name: s for s in client.status()}
        assert states["time"].state == "connected"
        assert states["ghost"].state != "connected"
        assert "no-such-server" in (states["ghost"].last_error or "")
        assert states["down"].state != "connected" and states["down"].last_error
        assert registry.tool_names == ["zeta", "mcp_time_convert_time", "mcp_time_get_current_time"]


@pytest.mark.parametrize(
    ("mode", "entry"),
    [
        ("streamableHttp", {"url": "http://127.0.0.1:{port}/mcp"}),
        ("sse", {"type": "sse", "url": "http://127.0.0.1:{port}/sse"}),
    ],
)
async def test_everything_server_over_http_transports(
    parts: Any, workspace: Path, mode: str, entry: dict[str, str]
) -> None:
    with socket.socket() as probe:  # a free port for the node server
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        parts.node(),
        *parts.everything()["args"],
        mode,
        env={"PATH": os.environ["PATH"], "PORT": str(port)},
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        async with asyncio.timeout(30):
            while f"{port}" not in (await process.stderr.readline()).decode():
                pass
        registry = _registry(workspace)
        config = {"mcpServers": {"web": {k: v.format(port=port) for k, v in entry.items()}}}
        async with MCPClient(config, registry) as client:
            assert client.status()[0].state == "connected", client.status()
            echoed = await _run(registry, "mcp_web_echo", {"message": f"over {mode}"})
            assert echoed.status is OutcomeStatus.OK and f"over {mode}" in echoed.result.text
    finally:
        process.kill()
        await process.wait()


async def test_schemas_are_normalised_or_refused_and_output_is_checked(
    parts: Any, workspace: Path
) -> None:
    registry = _registry(workspace)
    quirky = {"command": sys.executable, "args": [str(Path(__file__).parent / "quirky_server.py")]}
    async with MCPClient({"mcpServers": {"q": quirky}}, registry) as client:
        (status,) = client.status()
        assert status.state == "connected"
        # a schema without "type": "object" is normalised, so casting works
        assert "mcp_q_no_type" in registry
        cast = await _run(registry, "mcp_q_no_type", {"n": "7"})
        assert cast.result.text == "n=7"
        # the others are refused at connection, each with its reason
        refused = dict(status.skipped)
        assert set(refused) == {"a.string", "remote_ref"}
        assert 'must describe an object ("type": "object")' in refused["a.string"]
        assert "refers to another document" in refused["remote_ref"]
        assert "mcp_q_a_string" not in registry
        # structuredContent that breaks the tool's own outputSchema is an error
        liar = await _run(registry, "mcp_q_liar", {})
        assert liar.status is OutcomeStatus.ERROR
        assert "MCP server 'q'" in liar.result.text
        assert "structured content" in liar.result.text.lower()


async def test_a_lone_surrogate_escape_from_a_server_is_read_as_text(workspace: Path) -> None:
    # The SDK's JSON parser refuses "\udc80" (Python's reads it): it dropped the whole
    # answer, and the call waited out its time limit. It is read now, each lone surrogate
    # written as the six characters \udc80, in keys as in values.
    registry = _registry(workspace)
    quirky = {"command": sys.executable, "args": [str(Path(__file__).parent / "quirky_server.py")]}
    async with MCPClient({"mcpServers": {"q": quirky}}, registry):
        outcome = await _run(registry, "mcp_q_lone_key", {})
        assert outcome.status is OutcomeStatus.OK, outcome.result.text
        assert outcome.result.text == "linked\n[resource link: lone <file:///lone>]"
        link = outcome.result.metadata[CONTENT_KEY][1]
        assert link["_meta"] == {"k\\udc80": "v\\udc80", "nested": [{"\\udc80": 1}]}


async def test_a_server_that_never_answers_times_out_at_connection(workspace: Path) -> None:
    registry = _registry(workspace)
    silent = {
        "command": sys.executable,
        "args": ["-c", "import time; time.sleep(120)"],
        "connect_timeout": 1,
    }
    async with MCPClient({"mcpServers": {"silent": silent}}, registry, backoff=(60, 60)) as client:
        (status,) = client.status()
        assert status.state == "disconnected"
        assert status.last_error == "timed out while connecting"
        assert registry.tool_names == ["zeta"]


async def test_a_huge_stderr_line_does_not_stop_the_log_relay(
    parts: Any, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolbridge.mcp.client")
    script = str(Path(__file__).parent / "quirky_server.py")
    noisy = {"command": sys.executable, "args": [script, "--noisy"]}
    async with MCPClient({"mcpServers": {"q": noisy}}, _registry(workspace)) as client:
        assert client.status()[0].state == "connected"
        await parts.eventually(
            lambda: any("stderr: after the long line" in r.getMessage() for r in caplog.records)
        )
