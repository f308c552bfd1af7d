"""MCP servers' tools as toolbridge tools: `MCPClient` connects, `MCPTool` calls.

Each configured server gets one `MCPConnection`: a background task that owns the
SDK's `Client` (the SDK requires a session to be entered and left in one task),
lists the server's tools into the registry as ``mcp_<server>_<tool>`` tools, re-lists
them on ``notifications/tools/list_changed``, and reconnects with exponential backoff
when the server exits. A call through an `MCPTool` is prepared like any other call
(casting and full validation against the server's ``inputSchema``) and then sent
under the server's own tool name. While a server is down its tools stay registered
(so the definitions a model has cached stay valid) and fail with a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
import mcp_types as mt
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolbridge.core.errors import ToolDefinitionError, ToolExecutionError
from toolbridge.core.frozen import freeze
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.sendable import sendable
from toolbridge.core.tool import Tool, ToolResult
from toolbridge.execution.progress import ToolProgress, current_progress_sink, tool_progress
from toolbridge.mcp.config import MCPServerConfig, load_mcp_config
from toolbridge.mcp.content import from_mcp_result
from toolbridge.mcp.names import local_names
from toolbridge.mcp.schemas import input_schema, output_schema, tool_policy

__all__ = ["MCPClient", "MCPConnection", "MCPServerStatus", "MCPTool", "MCPToolsChanged"]

logger = logging.getLogger(__name__)

ConnectionState = Literal["connecting", "connected", "disconnected", "stopped"]
RETRY_LATER = (
    "The MCP server is unavailable right now; do not retry immediately. Continue without "
    "this tool or tell the user the server is down."
)


class MCPTool(Tool):
    """A tool of an MCP server, registered under its ``mcp_<server>_<tool>`` name.

    `remote_name` is the server's own name for it; `definition` is the server's tool
    as listed; `idempotent` records ``idempotentHint`` for retry decisions.
    """

    def __init__(
        self,
        connection: MCPConnection,
        definition: mt.Tool,
        name: str,
        parameters: Mapping[str, Any],
        *,
        read_only: bool,
        requires_approval: bool,
        idempotent: bool,
    ) -> None:
        self._connection = connection
        self.definition = definition
        self.server = connection.config.name
        # Marks a tool that waits on an MCP server: without a `timeout` of its own, its
        # calls still get a limit (`ExecutionPolicy.time_limit`: 60 s by default).
        self.mcp_server = self.server
        self.remote_name = definition.name
        self.name = name
        self.description = (
            definition.description
            or definition.title
            or f"Tool {definition.name!r} of MCP server {self.server!r}."
        )
        self.parameters = freeze(parameters)
        self.read_only = read_only
        self.requires_approval = requires_approval
        self.idempotent = idempotent
        self.timeout = connection.config.timeout
        self.defer_loading = connection.config.defer_loading

    async def execute(self, /, **arguments: Any) -> ToolResult:
        # positional-only self: a server's tool may well have a parameter called "self"
        return await self._connection.call(self.remote_name, arguments)


@dataclass(frozen=True, slots=True)
class MCPToolsChanged:
    """A server's tools changed in the registry (connected, re-listed or filtered)."""

    server: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    updated: tuple[str, ...]
    definitions_hash: str


@dataclass(frozen=True, slots=True)
class MCPServerStatus:
    """Where one server stands: state, tools, refused tools and the last error."""

    name: str
    state: ConnectionState
    tools: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    last_error: str | None
    attempts: int


ChangeListener = Callable[[MCPToolsChanged], None]


class MCPConnection:
    """One MCP server: the task that keeps it connected and the tools it contributes."""

    def __init__(
        self,
        config: MCPServerConfig,
        registry: ToolRegistry,
        *,
        listeners: list[ChangeListener],
        backoff: tuple[float, float],
        client_info: mt.Implementation,
    ) -> None:
        self.config = config
        self.registry = registry
        self.state: ConnectionState = "connecting"
        self.last_error: str | None = None
        self.attempts = 0
        self.tools: dict[str, MCPTool] = {}
        self.skipped: list[tuple[str, str]] = []
        self.server_info: mt.Implementation | None = None
        self.listings = 0  # tools/list round trips so far (connects and list_changed)
        self._listeners = listeners
        self._backoff = backoff
        self._client_info = client_info
        self._client: Client | None = None
        self._wake = asyncio.Event()
        self._closed = False
        self._refresh = False
        self._was_up = False
        self._stopping = False
        self._reported: str | None = None  # the failure last logged as a warning
        self._http_error: str | None = None
        self._connected = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        workspace = Path(registry.context.workspace).resolve()
        self._root = mt.Root.model_validate(
            {"uri": workspace.as_uri(), "name": workspace.name or str(workspace)}
        )

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name=f"mcp server {self.config.name}")

    async def first_attempt(self) -> None:
        """Wait until the first connection attempt succeeded or failed."""
        await self._first_attempt.wait()

    async def wait_connected(self) -> None:
        """Wait until the server is connected (again)."""
        await self._connected.wait()

    async def stop(self) -> None:
        """Disconnect (the stdio server process ends) and remove this server's tools."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping = True
            task.cancel()
            await asyncio.wait([task])
        self.state = "stopped"
        self._apply({})

    @property
    def client(self) -> Client | None:
        """The SDK client while connected (for resources, prompts, ...); None otherwise."""
        return self._client

    def status(self) -> MCPServerStatus:
        return MCPServerStatus(
            self.config.name,
            self.state,
            tuple(self.tools),
            tuple(self.skipped),
            self.last_error,
            self.attempts,
        )

    async def _run(self) -> None:
        low, high = self._backoff
        delay = low
        while True:
            self.state = "connecting"
            self.attempts += 1
            self._was_up = False
            self._http_error = None
            try:
                await self._session()  # returns only by raising: the connection ended
            except Exception as exc:
                if self._stopping:
                    # stop() cancelled this task while the SDK's transport was failing, and
                    # its cleanup (anyio) swallowed the cancel: end as stop() asked, or
                    # stop() would wait forever on the next sleep.
                    raise asyncio.CancelledError from None
                if self._was_up:  # this outage starts the backoff afresh
                    delay = low
                self.last_error = _describe(exc)
                if self._http_error is not None:
                    self.last_error = f"{self._http_error}: {self.last_error}"
                self._report_failure(delay)
            self.state = "disconnected"
            self._connected.clear()
            self._first_attempt.set()
            await asyncio.sleep(delay)
            delay = min(delay * 2, high)

    def _report_failure(self, delay: float) -> None:
        """A failure is news once: the first of an outage (or a new error) is a warning,
        the same error again on the next attempts is logged at debug level, so a server
        that cannot start does not fill the log. `status()` always has the state."""
        if self.last_error != self._reported:
            self._reported = self.last_error
            logger.warning(
                "MCP server %r: %s (attempt %d; retrying in %.1f s, then with a growing "
                "delay; the same failure again is logged at debug level)",
                self.config.name,
                self.last_error,
                self.attempts,
                delay,
            )
            return
        logger.debug(
            "MCP server %r: %s (attempt %d; retrying in %.1f s)",
            self.config.name,
            self.last_error,
            self.attempts,
            delay,
        )

    async def _session(self) -> None:
        """Connect, list the tools, then serve until the transport closes."""
        self._closed = self._refresh = False
        self._wake.clear()
        async with AsyncExitStack() as stack:
            transport = await self._transport(stack)
            client = self._new_client(transport)
            async with asyncio.timeout(self.config.connect_timeout):
                await stack.enter_async_context(client)
                await self._list_tools(client)
            if self._closed:
                raise ConnectionError("the server closed the connection while connecting")
            if self._stopping:  # a cancel the SDK swallowed while connecting (see _run)
                raise asyncio.CancelledError
            self.server_info = client.server_info
            self._client = client
            self._was_up = True
            self._reported = None  # the next outage is news again
            self.state = "connected"
            self.attempts = 0
            self.last_error = None
            self._connected.set()
            self._first_attempt.set()
            logger.info("MCP server %r connected: %d tools", self.config.name, len(self.tools))
            try:
                while True:
                    await self._wake.wait()
                    self._wake.clear()
                    if self._closed:
                        raise ConnectionError("the server closed the connection")
                    if self._refresh:
                        self._refresh = False
                        await self._relist(client)
            finally:
                self._client = None

    async def _relist(self, client: Client) -> None:
        """Re-list after ``list_changed``; a failed listing keeps the tools we have."""
        try:
            await self._list_tools(client)
        except (MCPError, ValidationError, RuntimeError) as exc:
            logger.warning(
                "MCP server %r: re-listing its tools failed, keeping the previous list: %s",
                self.config.name,
                _describe(exc),
            )

    def _new_client(self, transport: AbstractAsyncContextManager[Any]) -> Client:
        with warnings.catch_warnings():  # roots are deprecated in 2026-07-28, not in 2025-11-25
            warnings.simplefilter("ignore")
            return Client(
                transport,
                mode="legacy",
                cache=None,
                client_info=self._client_info,
                list_roots_callback=self._list_roots,
                logging_callback=self._server_log,
                message_handler=self._on_message,
            )

    async def _transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Any]:
        config = self.config
        inner: AbstractAsyncContextManager[Any]
        if config.transport == "stdio":
            assert config.command is not None
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env),
                cwd=config.cwd,
            )
            inner = stdio_client(params, errlog=await self._stderr_pipe(stack))
        elif config.transport == "sse":
            assert config.url is not None
            inner = sse_client(config.url, headers=dict(config.headers) or None)
        else:
            assert config.url is not None
            http = create_mcp_http_client(headers=dict(config.headers) or None)
            http.event_hooks["response"].append(self._http_response)
            await stack.enter_async_context(http)
            inner = streamable_http_client(config.url, http_client=http)
        return _watch(inner, self._on_transport_closed)

    async def _stderr_pipe(self, stack: AsyncExitStack) -> Any:
        """A pipe for the server's stderr whose lines go to this module's logger."""
        read_fd, write_fd = os.pipe()
        writer = os.fdopen(write_fd, "w")
        reader = os.fdopen(read_fd, "rb")
        loop = asyncio.get_running_loop()
        stream = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), reader
        )
        name = self.config.name

        async def relay() -> None:
            pending = b""
            while chunk := await stream.read(1 << 16):  # chunks: a huge line cannot stop it
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > 1 << 16:
                    lines, pending = [*lines, pending], b""
                for line in lines:
                    if text := line.decode("utf-8", "replace").rstrip():
                        logger.info("MCP server %r stderr: %s", name, text[:2000])
            if text := pending.decode("utf-8", "replace").rstrip():
                logger.info("MCP server %r stderr: %s", name, text[:2000])

        task = asyncio.create_task(relay())

        async def close() -> None:
            writer.close()  # the child holds its own copy; EOF comes when it exits
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 1.0)
            task.cancel()
            transport.close()

        stack.push_async_callback(close)
        return writer

    async def _http_response(self, response: Any) -> None:
        """Remember an HTTP error status: the SDK reports it only as a generic error."""
        if response.status_code >= 400:
            self._http_error = f"HTTP {response.status_code} from {response.request.url}"

    # --- what the server sends us -------------------------------------------------------

    def _on_transport_closed(self) -> None:
        # at once, not when the connection task gets to it: no call may use a dead session
        self._client = None
        self._connected.clear()
        if self.state == "connected":
            self.state = "disconnected"
        self._closed = True
        self._wake.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            logger.info("MCP server %r: tool list changed", self.config.name)
            self._refresh = True
            self._wake.set()
        elif isinstance(message, Exception):
            logger.warning("MCP server %r: transport error: %s", self.config.name, message)
        await anyio.lowlevel.checkpoint()

    async def _server_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        logger.info("MCP server %r log (%s): %s", self.config.name, params.level, params.data)

    async def _list_roots(self, context: Any) -> mt.ListRootsResult:
        return mt.ListRootsResult(roots=[self._root])

    # --- tools ------------------------------------------------------------------------

    async def _list_tools(self, client: Client) -> None:
        listed: list[mt.Tool] = []
        skipped: list[tuple[str, str]] = []
        cursor: str | None = None
        while True:
            try:
                page = await client.list_tools(cursor=cursor)
            except ValidationError:  # one tool the SDK refuses must not cost the others
                page = await self._lenient_page(client, cursor, skipped)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.listings += 1
        wanted = [tool for tool in listed if self.config.wants(tool.name)]
        names = local_names(self.config.name, (tool.name for tool in wanted))
        built: dict[str, MCPTool] = {}
        for definition in wanted:
            name = names[definition.name]
            owner = f"MCP server {self.config.name!r}, tool {definition.name!r}"
            try:
                built[name] = self._build(definition, name, owner)
            except ToolDefinitionError as exc:
                skipped.append((definition.name, str(exc)))
        self.skipped = skipped
        self._apply(built)

    async def _lenient_page(
        self, client: Client, cursor: str | None, skipped: list[tuple[str, str]]
    ) -> mt.ListToolsResult:
        """A ``tools/list`` page taken tool by tool, for servers the SDK refuses as a whole.

        The SDK rejects a listing in which any schema lacks ``"type": "object"``; servers in
        the wild omit it. Here each schema is normalised (or the tool refused with its
        reason), and the listing is handed back to the session so that it still checks
        structured results against their output schemas. Uses the session's internals:
        the SDK has no public lenient listing.
        """
        session: Any = client.session
        data: dict[str, Any] = {
            "method": "tools/list",
            "params": {"cursor": cursor} if cursor else None,
        }
        options: dict[str, Any] = {}
        session._stamp(data, options)
        raw = await session._dispatcher.send_raw_request("tools/list", data.get("params"), options)
        tools: list[mt.Tool] = []
        for item in raw.get("tools") or []:
            name = str(item.get("name")) if isinstance(item, Mapping) else repr(item)
            owner = f"MCP server {self.config.name!r}, tool {name!r}"
            try:
                if not isinstance(item, Mapping):
                    raise ToolDefinitionError(f"{owner}: a tool must be a JSON object")
                fixed = {**item, "inputSchema": input_schema(item.get("inputSchema"), owner=owner)}
                tools.append(mt.Tool.model_validate(fixed))
            except ToolDefinitionError as exc:
                skipped.append((name, str(exc)))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                skipped.append(
                    (name, f"{owner}: invalid tool definition at {where}: {first['msg']}")
                )
        page = mt.ListToolsResult(tools=tools, next_cursor=raw.get("nextCursor"))
        session._absorb_tool_listing(page, complete=cursor is None and page.next_cursor is None)
        return page

    def _build(self, definition: mt.Tool, name: str, owner: str) -> MCPTool:
        parameters = input_schema(definition.input_schema, owner=owner)
        output_schema(definition.output_schema, owner=owner)
        policy = tool_policy(
            definition.annotations,
            trusted=self.config.trusted,
            require_approval=self.config.require_approval,
        )
        return MCPTool(
            self,
            definition,
            name,
            parameters,
            read_only=policy.read_only,
            requires_approval=policy.requires_approval,
            idempotent=policy.idempotent,
        )

    def _apply(self, built: dict[str, MCPTool]) -> None:
        """Make the registry hold exactly `built` for this server; unchanged tools stay."""
        registry = self.registry
        old = self.tools
        removed = [name for name in old if name not in built]
        for name in removed:
            if registry.get(name) is old[name]:
                registry.unregister(name)
        added: list[str] = []
        updated: list[str] = []
        kept: dict[str, MCPTool] = {}
        for name, tool in built.items():
            previous = old.get(name)
            if previous is not None and previous.definition == tool.definition:
                kept[name] = previous
                continue
            current = registry.get(name)
            if current is not None and current is not previous:
                self.skipped.append(
                    (tool.remote_name, f"the name {name!r} is taken by another tool")
                )
                continue
            try:
                registry.register(tool, replace=previous is not None)
            except ToolDefinitionError as exc:
                self.skipped.append((tool.remote_name, str(exc)))
                if previous is not None:
                    registry.unregister(name)
                    removed.append(name)
                continue
            (updated if previous is not None else added).append(name)
            kept[name] = tool
        self.tools = kept
        for remote, reason in self.skipped:
            logger.warning(
                "MCP server %r: tool %r not registered: %s", self.config.name, remote, reason
            )
        if added or removed or updated:
            event = MCPToolsChanged(
                self.config.name,
                tuple(added),
                tuple(removed),
                tuple(updated),
                registry.definitions_hash,
            )
            for listener in self._listeners:
                try:
                    listener(event)
                except Exception:
                    logger.exception("MCP tools-changed listener %r failed", listener)

    # --- calls ------------------------------------------------------------------------

    async def call(self, remote_name: str, arguments: dict[str, Any]) -> ToolResult:
        """Send one ``tools/call``; a failure of the server or the link raises for the model.

        Cancelling the caller (a toolbridge timeout, a cancelled run) sends the server
        ``notifications/cancelled`` for the request.
        """
        server = self.config.name
        client = self._client
        if client is None:
            detail = f"; last error: {self.last_error}" if self.last_error else ""
            raise ToolExecutionError(
                f"MCP server {server!r} is not connected ({self.state}, reconnecting{detail})",
                hint=RETRY_LATER,
            )
        sink = current_progress_sink()
        relay = _progress_relay(sink) if sink is not None else None
        try:
            # the session's own call: the handshake era has no input_required rounds, and
            # Client.call_tool's driver for them costs about as much as the rest of toolbridge
            result = await client.session.call_tool(remote_name, arguments, progress_callback=relay)
        except MCPError as exc:
            if exc.code == mt.CONNECTION_CLOSED:
                self._on_transport_closed()
                raise ToolExecutionError(
                    f"MCP server {server!r} closed the connection during the call to "
                    f"{remote_name!r} (the server exited or crashed); the call may have partly "
                    "run. toolbridge is reconnecting.",
                    hint=RETRY_LATER,
                ) from exc
            raise ToolExecutionError(
                f"MCP server {server!r} refused the call to {remote_name!r}: {exc.error.message} "
                f"(JSON-RPC error {exc.error.code})"
            ) from exc
        except RuntimeError as exc:  # the SDK's output-schema check, unanswerable input requests
            raise ToolExecutionError(f"MCP server {server!r}: {exc}") from exc
        except ValidationError as exc:
            raise ToolExecutionError(
                f"MCP server {server!r} sent a malformed result for {remote_name!r}: "
                f"{exc.error_count()} validation errors, first: {exc.errors()[0]['msg']}"
            ) from exc
        return from_mcp_result(result, server=server, tool=remote_name)


def _progress_relay(sink: Callable[[ToolProgress], None]) -> Any:
    async def relay(progress: float, total: float | None, message: str | None) -> None:
        report = tool_progress(progress, total, message)  # a server's numbers: bounded
        if report is None:
            return
        try:
            sink(report)
        except Exception:
            logger.exception("progress sink failed")

    return relay


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    if isinstance(exc, TimeoutError):
        return "timed out while connecting"
    if isinstance(exc, MCPError):
        return f"{exc.error.message} (JSON-RPC error {exc.error.code})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@asynccontextmanager
async def _watch(
    inner: AbstractAsyncContextManager[Any], on_closed: Callable[[], None]
) -> AsyncIterator[Any]:
    """The transport `inner`, with `on_closed` called when its read side ends."""
    async with inner as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_closed), write_stream


def _readable(item: Any) -> Any:
    """`item` as read from a transport, or the message the SDK refused only for a lone
    surrogate escape (``"\\udc80"``, which its JSON parser refuses and Python's reads),
    parsed with each lone surrogate written as text, as `sendable` does: the SDK dropped
    the message, and the call it answered waited out its time limit."""
    if not isinstance(item, ValidationError):
        return item
    errors = item.errors()
    if len(errors) != 1 or errors[0]["type"] != "json_invalid":
        return item
    if "surrogate" not in errors[0]["msg"]:
        return item
    try:
        value = json.loads(errors[0]["input"])
        message = mt.jsonrpc_message_adapter.validate_python(sendable(value), by_name=False)
    except ValueError:
        return item
    return SessionMessage(message)


class _WatchedReadStream:
    """A read stream that reports its end of stream (the server went away), and reads
    the messages with a lone surrogate the SDK refuses (`_readable`)."""

    def __init__(self, inner: Any, on_closed: Callable[[], None]) -> None:
        self._inner = inner
        self._on_closed = on_closed

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return _readable(await self._inner.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_closed()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return _readable(await self._inner.__anext__())
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._on_closed()
            raise

    async def __aenter__(self) -> _WatchedReadStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


class MCPClient:
    """Connects to MCP servers and keeps their tools in a registry.

    ``async with MCPClient(config, registry) as mcp:`` connects every server (each in
    its own task; one server failing leaves the others alone), waits for each first
    attempt, and on exit disconnects and removes their tools. `config` is a path to an
    ``mcpServers`` JSON file, the parsed dict, or `MCPServerConfig` objects.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | Sequence[MCPServerConfig],
        registry: ToolRegistry | None = None,
        *,
        listeners: Iterable[ChangeListener] = (),
        backoff: tuple[float, float] = (0.5, 30.0),
        client_name: str = "toolbridge",
    ) -> None:
        if isinstance(config, str | os.PathLike | Mapping):
            servers = load_mcp_config(config)
        else:
            servers = list(config)
        names = [server.name for server in servers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ToolDefinitionError(f"MCP server names must be unique: {duplicates}")
        self.registry = registry if registry is not None else ToolRegistry()
        self.listeners: list[ChangeListener] = list(listeners)
        from toolbridge.version import __version__

        info = mt.Implementation(name=client_name, version=__version__)
        self.connections = {
            server.name: MCPConnection(
                server,
                self.registry,
                listeners=self.listeners,
                backoff=backoff,
                client_info=info,
            )
            for server in servers
        }

    async def start(self) -> None:
        """Start every connection and wait for each first attempt (connected or failed)."""
        for connection in self.connections.values():
            connection.start()
        await asyncio.gather(*(c.first_attempt() for c in self.connections.values()))

    async def aclose(self) -> None:
        """Disconnect every server and remove their tools from the registry."""
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def status(self) -> list[MCPServerStatus]:
        return [connection.status() for connection in self.connections.values()]

    async def __aenter__(self) -> MCPClient:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
