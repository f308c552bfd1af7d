"""``toolbridge mcp``: serve the tools over MCP, and look at configured MCP servers."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from toolbridge.cli.app import (
    AllowUnsandboxedOption,
    ConfigOption,
    ScopeOption,
    VerboseOption,
    WorkspaceOption,
    app,
    err,
    out,
    reporting,
)
from toolbridge.cli.display import SafeFormatter, plain, show
from toolbridge.cli.loading import LoadOptions, load_tools
from toolbridge.errors import ToolbridgeError
from toolbridge.executor import ExecutionPolicy
from toolbridge.registry import ToolRegistry
from toolbridge.tool import ToolContext

if TYPE_CHECKING:
    from toolbridge.mcp import MCPServerStatus

mcp_app = typer.Typer(
    name="mcp",
    help="MCP both ways: serve the tools to MCP clients, use MCP servers' tools.",
    no_args_is_help=True,
)
app.add_typer(mcp_app)

ServersOption = Annotated[
    Path | None,
    typer.Option(
        "--servers",
        "-s",
        help='An "mcpServers" JSON file (Claude Desktop / Cursor format): serve their tools too.',
        dir_okay=False,
        exists=True,
        resolve_path=True,
    ),
]


def _address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise typer.BadParameter(f"expected HOST:PORT or PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise typer.BadParameter(f"port {number} is out of range")
    return host or "127.0.0.1", number


@mcp_app.command("serve")
def serve_command(
    *,
    workspace: WorkspaceOption = None,
    scope: ScopeOption = "default",
    config: ConfigOption = None,
    servers: ServersOption = None,
    verbose: VerboseOption = False,
    allow_unsandboxed_exec: AllowUnsandboxedOption = False,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            help="Serve streamable HTTP on HOST:PORT (default host 127.0.0.1) instead of stdio.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="TOOLBRIDGE_MCP_TOKEN",
            help="With --http: require 'Authorization: Bearer TOKEN' on every request.",
        ),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Time limit per call, in seconds.")
    ] = None,
) -> None:
    """Serve the built-in tools and plugins (and, with --config, other MCP servers' tools)."""
    handler = logging.StreamHandler(sys.stderr)  # servers' and the SDK's warnings, cleaned
    handler.setFormatter(SafeFormatter(logging.BASIC_FORMAT))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    address = _address(http) if http is not None else None
    if (
        address is not None
        and token is None
        and address[0] not in ("127.0.0.1", "localhost", "::1")
    ):
        show(err, (f"warning: serving on {address[0]} without --token", "yellow"))
    with reporting(verbose):
        loaded = load_tools(LoadOptions(workspace, scope, config, verbose, allow_unsandboxed_exec))
    registry = loaded.registry
    policy = loaded.policy
    if timeout is not None:
        policy = dataclasses.replace(policy, default_timeout=timeout)
    try:
        asyncio.run(_serve(registry, servers, address, token, policy))
    except ToolbridgeError as exc:
        show(err, f"error: {exc}")
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


async def _serve(
    registry: ToolRegistry,
    config: Path | None,
    address: tuple[str, int] | None,
    token: str | None,
    policy: ExecutionPolicy,
) -> None:
    from toolbridge.mcp import MCPClient, MCPToolServer

    server = MCPToolServer(registry, policy=policy)
    pending: set[asyncio.Task[None]] = set()

    def changed(_event: object) -> None:
        task = asyncio.get_running_loop().create_task(server.tools_changed())
        pending.add(task)
        task.add_done_callback(pending.discard)

    client = MCPClient(config, registry, listeners=[changed]) if config is not None else None
    if client is not None:
        await client.start()
        for status in client.status():
            if status.state != "connected":
                show(err, f"MCP server {status.name!r}: {status.last_error}")
    try:
        if address is None:
            await server.run_stdio()
        else:
            host, port = address

            def ready(bound: int) -> None:
                show(err, f"serving MCP on http://{host}:{bound}/mcp")

            await server.run_http(host, port, token=token, ready=ready)
    finally:
        if client is not None:
            await client.aclose()


@mcp_app.command("servers")
def servers_command(
    config: Annotated[
        Path,
        typer.Argument(help='An "mcpServers" JSON file.', dir_okay=False, exists=True),
    ],
    workspace: WorkspaceOption = None,
) -> None:
    """Connect to the servers of a config and list their tools (and what was refused)."""
    from toolbridge.mcp import MCPClient

    registry = ToolRegistry(context=ToolContext(workspace=(workspace or Path.cwd()).resolve()))

    async def connect() -> list[tuple[MCPServerStatus, list[tuple[str, str]]]]:
        async with MCPClient(config, registry) as client:  # read the tools before closing
            return [
                (status, [_row(registry, name) for name in status.tools])
                for status in client.status()
            ]

    try:
        servers = asyncio.run(connect())
    except ToolbridgeError as exc:
        show(err, f"error: {exc}")
        raise typer.Exit(2) from None
    failed = False
    for status, rows in servers:
        table = Table("tool", "flags", title=plain(f"{status.name}: {status.state}"))
        for row in rows:
            table.add_row(*map(plain, row))
        out.print(table)
        for remote, reason in status.skipped:
            show(err, f"refused {remote!r}: {reason}")
        if status.state != "connected":
            failed = True
            show(err, f"{status.name}: {status.last_error}")
    if failed:
        raise typer.Exit(1)


def _row(registry: ToolRegistry, name: str) -> tuple[str, str]:
    """A tool's name and the policy flags its server's annotations gave it."""
    tool = registry.get(name)
    if tool is None:
        return name, ""
    flags = [
        flag
        for flag, on in (("read-only", tool.read_only), ("approval", tool.requires_approval))
        if on
    ]
    return name, ", ".join(flags)
