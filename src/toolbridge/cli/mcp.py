"""``toolbridge mcp``: serve the tools over MCP, and look at configured MCP servers."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolbridge.cli.app import (
    AllowUnsandboxedOption,
    CliError,
    ConfigOption,
    ExitCode,
    ScopeOption,
    VerboseOption,
    WorkspaceOption,
    app,
    err,
    one_line,
    out,
    reporting,
)
from toolbridge.cli.display import SafeFormatter, plain, show, table
from toolbridge.cli.loading import LoadOptions, load_tools
from toolbridge.core.errors import ToolbridgeError
from toolbridge.core.loader import ToolLoader
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import ToolContext
from toolbridge.execution.executor import ExecutionPolicy

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
    if host.startswith("[") or host.endswith("]"):  # an IPv6 host as a URL writes it: [::1]
        if not (host.startswith("[") and host.endswith("]")) or len(host) < 3:
            raise typer.BadParameter(f"expected [IPv6 host]:PORT, got {value!r}")
        host = host[1:-1]
    return host or "127.0.0.1", number


def _joined(host: str, port: int) -> str:
    """HOST:PORT as a URL writes it (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
    tool_search: Annotated[
        bool,
        typer.Option(
            "--tool-search",
            help="List only search_tools and call_tool instead of every tool (for large sets).",
        ),
    ] = False,
) -> None:
    """Serve the built-in tools and plugins (and, with --servers, other MCP servers' tools).

    On stdio it serves until the client closes stdin, or Ctrl-C (exit 130).
    """
    handler = logging.StreamHandler(sys.stderr)  # servers' and the SDK's warnings, cleaned
    handler.setFormatter(SafeFormatter(logging.BASIC_FORMAT, tracebacks=verbose))
    if verbose:  # toolbridge's records have their own handler then: each shown once
        handler.addFilter(lambda record: record.name.partition(".")[0] != "toolbridge")
    else:  # a plugin that cannot load is one 'skipped' line of `load_tools`, not a record
        handler.addFilter(lambda record: record.name != ToolLoader.__module__)
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
        policy = loaded.policy
        if timeout is not None:
            try:
                policy = dataclasses.replace(policy, default_timeout=timeout)
            except ValueError:  # 0, negative, NaN: a traceback before
                raise CliError(
                    f"--timeout {timeout} is not a time limit: give a positive number of seconds"
                ) from None
    registry = loaded.registry
    with reporting(verbose):
        try:
            asyncio.run(_serve(registry, servers, address, token, policy, tool_search=tool_search))
        except ToolbridgeError as exc:
            raise CliError(str(exc)) from None
        except OSError as exc:
            if address is None:
                raise
            host, port = address
            raise CliError(
                f"cannot serve on {_joined(host, port)}: {exc.strerror or exc}; pick another "
                "address with --http HOST:PORT (port 0 picks a free one)"
            ) from None


async def _serve(
    registry: ToolRegistry,
    config: Path | None,
    address: tuple[str, int] | None,
    token: str | None,
    policy: ExecutionPolicy,
    *,
    tool_search: bool = False,
) -> None:
    from toolbridge.mcp import MCPClient, MCPToolServer

    server = MCPToolServer(registry, policy=policy, tool_search=tool_search)
    pending: set[asyncio.Task[None]] = set()

    def changed(_event: object) -> None:
        task = asyncio.get_running_loop().create_task(server.tools_changed())
        pending.add(task)
        task.add_done_callback(pending.discard)

    client = MCPClient(config, registry, listeners=[changed]) if config is not None else None
    if client is not None:  # a server that cannot start: the gateway warns, once
        await client.start()
    try:
        if address is None:
            await _until_interrupted(server.run_stdio(), started=_announce_stdio)
        else:
            host, port = address

            def ready(bound: int) -> None:
                show(err, f"serving MCP on http://{_joined(host, bound)}/mcp")

            await server.run_http(host, port, token=token, ready=ready)
    except _Interrupted:
        if client is not None:
            await client.aclose()
        _end_interrupted()
    finally:
        if client is not None:
            await client.aclose()


def _announce_stdio() -> None:
    """On a terminal, serving on stdio looks frozen: say what it does and how to stop."""
    if sys.stderr.isatty():
        err.print(
            "serving MCP on stdio: a client talks on stdin/stdout; "
            "Ctrl-C or closing stdin stops it",
            markup=False,
            highlight=False,
        )


async def _until_interrupted(
    serving: Coroutine[Any, Any, None], started: Callable[[], None]
) -> None:
    """Run `serving` until it ends (the client closed stdin) or Ctrl-C; `started` is
    called once Ctrl-C is handled. The stdin reader is a thread blocked in read(), which
    cancelling cannot stop (the process waited for another line, Ctrl-C after Ctrl-C):
    on Ctrl-C the caller's clean-up runs, then the process ends with exit code 130
    without waiting for that thread."""
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    started()
    task = asyncio.ensure_future(serving)
    waiting = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        waiting.cancel()
    if task.done():
        task.result()  # its error, if it ended with one
        return
    task.cancel()
    raise _Interrupted


class _Interrupted(Exception):
    """Ctrl-C while serving on stdio: `_serve` cleans up, then the process ends."""


def _end_interrupted() -> None:
    """End the process with exit code 130 now (see `_until_interrupted`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(ExitCode.INTERRUPTED)


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
        show(err, one_line(f"Error: {exc}"))
        raise typer.Exit(ExitCode.USAGE) from None
    failed = False
    for status, rows in servers:
        grid = table("tool", "flags", title=plain(f"{status.name}: {status.state}"))
        for row in rows:
            grid.add_row(*map(plain, row))
        out.print(grid)
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
