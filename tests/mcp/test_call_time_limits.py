"""Every MCP tool call ends: a server that never answers gives a `timeout` outcome (and
is told the call was cancelled): after the server's `timeout`, else the policy's
`mcp_timeout`, else its `default_timeout`, else 60 s."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from toolbridge import (
    ErrorKind,
    ExecutionPolicy,
    OutcomeStatus,
    ToolCallRequest,
    ToolContext,
    ToolExecutor,
    ToolRegistry,
)
from toolbridge.mcp import MCPClient, MCPTool

SILENT = str(Path(__file__).parent / "silent_server.py")
HANG_BOUND = 60.0  # far beyond every limit below: only a real hang reaches it


def silent(log: Path, **extra: Any) -> dict[str, Any]:
    return {"mcpServers": {"s": {"command": sys.executable, "args": [SILENT, str(log)], **extra}}}


async def call_wait(registry: ToolRegistry, policy: ExecutionPolicy) -> Any:
    executor = ToolExecutor(registry, policy)
    async with asyncio.timeout(HANG_BOUND):
        [outcome] = await executor.run([ToolCallRequest("c1", "mcp_s_wait", {})])
    return outcome


async def test_mcp_calls_always_have_a_limit(workspace: Path, tmp_path: Path) -> None:
    registry = ToolRegistry([], context=ToolContext(workspace=workspace))
    async with MCPClient(silent(tmp_path / "log"), registry):
        tool = registry.get("mcp_s_wait")
        assert isinstance(tool, MCPTool) and tool.timeout is None  # nothing configured
        assert ExecutionPolicy().time_limit(tool) == 60.0
        assert ExecutionPolicy(default_timeout=5).time_limit(tool) == 5
        assert ExecutionPolicy(mcp_timeout=7, default_timeout=5).time_limit(tool) == 7
    with pytest.raises(ValueError, match="mcp_timeout must be > 0"):
        ExecutionPolicy(mcp_timeout=0)


async def test_the_policy_limit_ends_a_call_the_server_never_answers(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    registry = ToolRegistry([], context=ToolContext(workspace=workspace))
    async with MCPClient(silent(log), registry) as client:
        assert client.status()[0].state == "connected"
        tool = registry.get("mcp_s_wait")
        assert isinstance(tool, MCPTool) and tool.timeout is None  # nothing configured
        outcome = await call_wait(registry, ExecutionPolicy(mcp_timeout=1))
        assert outcome.status is OutcomeStatus.ERROR
        assert outcome.result.error_kind is ErrorKind.TIMEOUT
        assert "tools/call" in log.read_text()
        # the server is told the call was abandoned
        await parts.eventually(lambda: "notifications/cancelled" in log.read_text())


async def test_the_servers_own_timeout_comes_first(workspace: Path, tmp_path: Path) -> None:
    registry = ToolRegistry([], context=ToolContext(workspace=workspace))
    async with MCPClient(silent(tmp_path / "log", timeout=1), registry):
        # the policy would give 60 s: the server's own limit comes first
        outcome = await call_wait(registry, ExecutionPolicy())
        assert outcome.result.error_kind is ErrorKind.TIMEOUT


async def test_without_an_mcp_limit_the_policys_default_timeout_applies(
    workspace: Path, tmp_path: Path
) -> None:
    registry = ToolRegistry([], context=ToolContext(workspace=workspace))
    async with MCPClient(silent(tmp_path / "log"), registry):
        outcome = await call_wait(registry, ExecutionPolicy(default_timeout=1))
        assert outcome.result.error_kind is ErrorKind.TIMEOUT
