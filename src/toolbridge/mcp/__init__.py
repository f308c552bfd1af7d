"""MCP both ways, on the official ``mcp`` SDK (the ``mcp`` extra).

Client: `MCPClient` puts the tools of MCP servers (an ``mcpServers`` config) into a
`ToolRegistry` as ``mcp_<server>_<tool>`` tools with full casting and validation.
Server: `MCPToolServer` serves a registry's tools over stdio or streamable HTTP.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("toolbridge.mcp needs the mcp extra: pip install 'toolbridge[mcp]'") from exc

from toolbridge.mcp.client import (
    MCPClient,
    MCPConnection,
    MCPServerStatus,
    MCPTool,
    MCPToolsChanged,
)
from toolbridge.mcp.config import MCPServerConfig, load_mcp_config
from toolbridge.mcp.server import MCPToolServer

__all__ = [
    "MCPClient",
    "MCPConnection",
    "MCPServerConfig",
    "MCPServerStatus",
    "MCPTool",
    "MCPToolServer",
    "MCPToolsChanged",
    "load_mcp_config",
]
