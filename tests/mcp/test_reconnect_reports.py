"""A server that cannot start is reported once (a warning), then at debug level on each
reconnect attempt; its state and error stay visible in `status()`."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from toolbridge import ToolContext, ToolRegistry
from toolbridge.mcp import MCPClient


async def test_a_missing_command_warns_once_then_logs_at_debug(
    parts: Any, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolbridge.mcp.client")
    missing = {"command": str(workspace / "no-such-server")}
    registry = ToolRegistry([], context=ToolContext(workspace=workspace))
    async with MCPClient(
        {"mcpServers": {"gone": missing}}, registry, backoff=(0.05, 0.1)
    ) as client:
        await parts.eventually(lambda: client.status()[0].attempts >= 4)
        (status,) = client.status()
        assert status.state in ("disconnected", "connecting")
        assert status.last_error is not None and "no-such-server" in status.last_error
    about = [r for r in caplog.records if "'gone'" in r.getMessage()]
    warnings = [r for r in about if r.levelno == logging.WARNING]
    debugs = [r for r in about if r.levelno == logging.DEBUG and "attempt" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "no-such-server" in warnings[0].getMessage()
    assert "logged at debug level" in warnings[0].getMessage()
    assert len(debugs) >= 2


async def test_closing_while_a_server_fails_to_start_never_hangs(
    parts: Any, workspace: Path
) -> None:
    """The SDK's cleanup of a failed spawn could swallow the cancel of `aclose`, which then
    waited forever (about one close in five here)."""
    missing = {"command": str(workspace / "no-such-server")}
    for _ in range(10):
        registry = ToolRegistry([], context=ToolContext(workspace=workspace))
        async with asyncio.timeout(60):  # a bound against the hang, not a timing assertion
            async with MCPClient(
                {"mcpServers": {"gone": missing}}, registry, backoff=(0.01, 0.02)
            ) as client:
                await parts.eventually(lambda: client.status()[0].attempts >= 3)
