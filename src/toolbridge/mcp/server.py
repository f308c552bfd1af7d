"""A registry served over MCP: `MCPToolServer`, on the SDK's low-level `Server`.

Every ``tools/call`` runs through one `ToolExecutor` (the same path as any other
call: casting, validation, approval, time limits, result caps), so an MCP client
gets exactly toolbridge's semantics and error messages. Tool flags become
annotations; a function tool with a typed return value gets an ``outputSchema``
and ``structuredContent``. A call that needs approval asks the user through MCP
elicitation when the client supports it, and is refused with a clear message when
it does not. Cancelling the request cancels the call; progress reported by a tool
(`toolbridge.execution.progress.report_progress`) is sent as ``notifications/progress``.

With ``tool_search=True`` a client lists only two tools, ``search_tools`` (BM25 or a
regular expression over the registry, as the agent's local search) and ``call_tool``
(a tool by name with its arguments), so a large registry costs it two definitions; a
``call_tool`` call runs exactly as a direct call of the tool would.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import socket
import typing
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, ToolConfigError
from toolbridge.core.frozen import thaw
from toolbridge.core.function_tool import FunctionTool
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.sendable import sendable
from toolbridge.core.tool import Tool, ToolResult, reset_session, set_session
from toolbridge.core.tool_search import MAX_LIMIT, SEARCH_PARAMETERS, ToolIndex
from toolbridge.execution.approval import ApprovalRequest
from toolbridge.execution.executor import ExecutionPolicy, ToolExecutor
from toolbridge.execution.outcomes import OutcomeStatus, ToolOutcome
from toolbridge.execution.progress import LoopSink, ToolProgress, progress_sink
from toolbridge.mcp.content import ERROR_KIND_META, STRUCTURED_KEY, to_mcp_content

__all__ = ["MCPToolServer"]

logger = logging.getLogger(__name__)

_APPROVAL_KEY = "toolbridge_approval"
_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this tool call",
            "description": "Allow the call to run with exactly these arguments.",
            "default": True,
        }
    },
    "required": ["approve"],
}


@dataclass(frozen=True, slots=True)
class _Output:
    """How a tool's return value becomes ``structuredContent``."""

    schema: dict[str, Any]
    dump: Callable[[Any, ToolResult], Any]


# The `_meta` key under which a client without an MCP session (the 2026 protocol) names
# its context session: requests that send the same key share exec sessions and a sandbox.
SESSION_META = "toolbridge/session"

_ENDED_WITH_REQUEST = (
    "Note: what this call left running has ended with its request: the client sent no "
    f"{SESSION_META!r} key in the request's _meta, so the request had a session of its "
    "own. To keep a command running across calls, the client sends the same key (a "
    "random UUID it keeps) with each of them."
)

SEARCH_TOOLS = "search_tools"
CALL_TOOL = "call_tool"
_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The tool's name, as search_tools gave it."},
        "arguments": {
            "type": "object",
            "description": "The tool's arguments, following its inputSchema.",
        },
    },
    "required": ["name"],
}


class _Server(Server[Any]):
    """The SDK server, announcing ``tools.listChanged`` on every transport."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class MCPToolServer:
    """Serve `registry` over MCP (``run_stdio``, ``run_http`` or the ASGI ``http_app``).

    Pass an `executor` to choose the policy (time limits, approval rule); by default one
    is made with `ExecutionPolicy()`. While it runs, a change of the registry (its
    definitions hash) is announced to the clients with ``notifications/tools/list_changed``
    within `watch_interval` seconds; `tools_changed()` announces it at once.
    `tool_search` lists ``search_tools`` and ``call_tool`` instead of every tool.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        executor: ToolExecutor | None = None,
        policy: ExecutionPolicy | None = None,
        name: str = "toolbridge",
        instructions: str | None = None,
        watch_interval: float = 1.0,
        tool_search: bool = False,
    ) -> None:
        from toolbridge.version import __version__

        if tool_search:
            taken = [n for n in (SEARCH_TOOLS, CALL_TOOL) if n in registry]
            if taken:
                raise ToolConfigError(
                    f"tool search serves its own {' and '.join(map(repr, taken))}, and the "
                    "registry has a tool of that name: rename it or serve without tool search"
                )
        self.tool_search = tool_search
        self._index: tuple[str, ToolIndex] | None = None
        self.registry = registry
        self.executor = executor or ToolExecutor(registry, policy)
        self.server = _Server(
            name,
            version=__version__,
            instructions=instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._listing: tuple[str, mt.ListToolsResult] | None = None
        self._outputs: dict[int, tuple[Tool, _Output | None]] = {}
        # per client connection: its session and the definitions hash it last heard of
        self._sessions: dict[int, tuple[Any, str]] = {}
        self._calls = 0
        self._watch_interval = watch_interval

    # --- transports -----------------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it disconnects."""
        async with self._watching(), stdio_server() as (read_stream, write_stream):
            await self.server.run(
                read_stream, write_stream, self.server.create_initialization_options()
            )

    def http_app(
        self, *, host: str = "127.0.0.1", token: str | None = None, path: str = "/mcp"
    ) -> Any:
        """The streamable-HTTP ASGI app; with `token`, requests need ``Authorization: Bearer``."""
        app = self.server.streamable_http_app(streamable_http_path=path, host=host)
        return app if token is None else _BearerAuth(app, token)

    async def run_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        token: str | None = None,
        path: str = "/mcp",
        ready: Callable[[int], None] | None = None,
    ) -> None:
        """Serve streamable HTTP on `host`:`port` (port 0 picks one; `ready` gets it)."""
        import uvicorn

        config = uvicorn.Config(
            self.http_app(host=host, token=token, path=path),
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
        )
        server = uvicorn.Server(config)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
        except OSError:
            sock.close()
            raise
        task = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            async with self._watching():
                if ready is not None:
                    ready(sock.getsockname()[1])
                await asyncio.shield(task)
        finally:
            if not task.done():  # cancelled: shut down cleanly (sessions, lifespan) first
                server.should_exit = True
                await asyncio.wait([task])
            sock.close()

    async def tools_changed(self) -> None:
        """Tell every client that listed the tools, and has not heard yet, that they changed."""
        digest = self.registry.definitions_hash
        for key, (session, seen) in list(self._sessions.items()):
            if seen == digest:
                continue
            self._sessions[key] = (session, digest)
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client that went away: forget it
                logger.debug("dropping MCP session %s: %r", key, exc)
                self._sessions.pop(key, None)

    @asynccontextmanager
    async def _watching(self) -> AsyncIterator[None]:
        """While serving: announce registry changes every `watch_interval` seconds."""

        async def watch() -> None:
            while True:
                await asyncio.sleep(self._watch_interval)
                await self.tools_changed()

        task = asyncio.create_task(watch())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.wait([task])

    # --- tools/list -----------------------------------------------------------------------

    async def _list_tools(
        self, ctx: Any, params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        digest = self.registry.definitions_hash
        self._remember(ctx.session, digest)
        if self._listing is None or self._listing[0] != digest:
            tools = (
                _search_definitions()
                if self.tool_search
                else [self._definition(tool) for tool in self.registry]
            )
            self._listing = (digest, sendable(mt.ListToolsResult(tools=tools), models=True))
        return self._listing[1]

    def _remember(self, session: Any, digest: str) -> None:
        # sessions are per request; the connection behind them identifies the client
        connection = getattr(session, "_connection", session)
        self._sessions[id(connection)] = (session, digest)

    def _client_session(self, ctx: Any) -> tuple[str | None, bool]:
        """The context session of the client behind the request `ctx`, and whether it is
        the request's own (ended once the request is answered):

        - streamable HTTP with an MCP session (``Mcp-Session-Id``): the client's own;
        - stdio: the registry context's (the process serves one client);
        - HTTP without a session (the 2026 protocol), where nothing in a request tells
          its client apart: the one of the key the client sends in ``_meta`` under
          ``toolbridge/session``, or else one of the request's own.
        """
        base = self.registry.context.session
        client = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
        if isinstance(client, str) and client:
            return f"{base}/mcp-{client}", False
        if ctx.request is None:  # stdio (or in-process): the process serves one client
            return None, False
        key = (ctx.meta or {}).get(SESSION_META)
        if isinstance(key, str) and key:
            digest = hashlib.sha256(key.encode(errors="surrogatepass")).hexdigest()[:32]
            return f"{base}/mcp-key-{digest}", False
        return f"{base}/mcp-request-{uuid.uuid4().hex}", True

    def _definition(self, tool: Tool) -> mt.Tool:
        output = self._output(tool)
        annotations = mt.ToolAnnotations(
            title=getattr(getattr(tool, "definition", None), "title", None),
            read_only_hint=tool.read_only,
            destructive_hint=False if tool.read_only else tool.requires_approval,
            idempotent_hint=getattr(tool, "idempotent", None),
        )
        return mt.Tool(
            name=tool.name,
            description=tool.description or None,
            input_schema=thaw(tool.parameters),
            output_schema=output.schema if output is not None else None,
            annotations=annotations,
        )

    def _output(self, tool: Tool) -> _Output | None:
        cached = self._outputs.get(id(tool))
        if cached is not None and cached[0] is tool:
            return cached[1]
        output = _output_of(tool)
        self._outputs[id(tool)] = (tool, output)
        return output

    # --- tools/call -----------------------------------------------------------------------

    async def _call_tool(
        self, ctx: Any, params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        return sendable(await self._answer(ctx, params), models=True)

    async def _answer(
        self, ctx: Any, params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        if self.tool_search and params.name == SEARCH_TOOLS:
            return await self._search(params.arguments or {})
        if self.tool_search and params.name == CALL_TOOL:
            inner = _inner_call(params)
            if isinstance(inner, mt.CallToolResult):
                return inner
            params = inner
        self._calls += 1
        call = ToolCallRequest(f"mcp-{ctx.request_id}-{self._calls}", params.name, params.arguments)
        relay = _ProgressRelay(ctx.session.report_progress)
        reports = LoopSink(relay)  # a sync tool reports from its thread: relayed on the loop
        # Each client its own context session: none sees or drives another's exec
        # sessions or shares its sandbox (and its /tmp).
        session, own = self._client_session(ctx)
        token = set_session(session)
        ended = False
        try:
            with progress_sink(reports):
                outcome = (await self.executor.run([call]))[0]
                request = outcome.approval
                if outcome.status is OutcomeStatus.PENDING_APPROVAL and request is not None:
                    answer = await self._ask(ctx, params, request)
                    if isinstance(answer, mt.InputRequiredResult):
                        return answer
                    if isinstance(answer, str):
                        outcome = _refused(outcome, answer)
                    else:
                        self._decide(request, answer)
                        outcome = (await self.executor.run([call]))[0]
        finally:
            reports.close()  # what a task the tool left running reports later is not sent
            reset_session(token)
            if own:  # nobody can reach what it left running: end it
                assert session is not None
                ended = await self._end_session(session)
        await relay.flush()
        result = self._result(outcome)
        if ended:
            result.content.append(mt.TextContent(type="text", text=_ENDED_WITH_REQUEST))
        return result

    async def _end_session(self, session: str) -> bool:
        """End what a request's own context session left running, in every tool: whether
        any had. A tool failing at it is logged, and the others still end theirs (its
        error would replace the request's answer, and leave their sessions running)."""
        ended = False
        for tool in list(self.registry):
            try:
                ended = await tool.end_session(session) or ended
            except Exception:
                logger.exception("tool %r could not end context session %r", tool.name, session)
        return ended

    async def _search(self, arguments: Mapping[str, Any]) -> mt.CallToolResult:
        """``search_tools``: the definitions of the best matches, as JSON text."""
        query, limit = arguments.get("query"), arguments.get("limit", 8)
        if not isinstance(query, str) or not query.strip():
            return _error_result(
                "search_tools needs 'query': words describing the tool you need, or a "
                "regular expression"
            )
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return _error_result(f"search_tools 'limit' must be an integer 1-{MAX_LIMIT}")
        # off the event loop: the first search after a change builds the index
        names = await asyncio.to_thread(self._search_names, query, limit)
        found = [tool for tool in map(self.registry.get, names) if tool is not None]
        if not found:
            text = (
                f"No tool matches {query!r}. Try other or fewer words, or a regular "
                "expression such as 'issue|ticket'."
            )
        else:
            definitions = [
                self._definition(tool).model_dump(by_alias=True, exclude_none=True)
                for tool in found
            ]
            text = json.dumps(
                {"tools": definitions, "note": "Run one with call_tool(name, arguments)."},
                ensure_ascii=False,
            )
        return mt.CallToolResult(content=[mt.TextContent(text=text)], is_error=False)

    def _search_names(self, query: str, limit: int) -> list[str]:
        digest = self.registry.definitions_hash
        if self._index is None or self._index[0] != digest:
            self._index = (digest, ToolIndex(list(self.registry)))
        return self._index[1].search(query, limit)

    async def _ask(
        self, ctx: Any, params: mt.CallToolRequestParams, request: ApprovalRequest
    ) -> mt.ElicitResult | mt.InputRequiredResult | str:
        """The user's answer through elicitation: asked now (a request to the client), asked
        by returning ``input_required`` (the 2026 protocol), or why the client cannot ask."""
        answered = (params.input_responses or {}).get(_APPROVAL_KEY)
        if isinstance(answered, mt.ElicitResult):
            return answered
        session = ctx.session
        capabilities = session.client_capabilities
        if capabilities is None or capabilities.elicitation is None:
            return "it does not support elicitation"
        arguments = json.dumps(request.arguments, ensure_ascii=False, default=str)
        message = f"Allow the tool {request.tool_name!r} to run with these arguments?\n{arguments}"
        if not session.can_send_request:
            form = mt.ElicitRequestFormParams(message=message, requested_schema=_APPROVAL_SCHEMA)
            return mt.InputRequiredResult(
                input_requests={_APPROVAL_KEY: mt.ElicitRequest(params=form)}
            )
        try:
            result: mt.ElicitResult = await session.elicit_form(
                message, _APPROVAL_SCHEMA, related_request_id=ctx.request_id
            )
        except Exception as exc:  # the client failed to ask: nothing runs
            logger.warning("elicitation for %r failed: %r", request.tool_name, exc)
            return f"asking failed ({type(exc).__name__}: {exc})"
        return result

    def _decide(self, request: ApprovalRequest, answer: mt.ElicitResult) -> None:
        content = answer.content or {}
        if answer.action == "accept" and content.get("approve", True) is True:
            self.executor.approve(request)
        else:
            reason = "declined" if answer.action != "cancel" else "cancelled the request"
            self.executor.deny(request, f"the user {reason} in the MCP client")

    def _result(self, outcome: ToolOutcome) -> mt.CallToolResult:
        result = outcome.result
        structured = None
        tool = self.registry.get(outcome.call.name) if outcome.ok else None
        if tool is not None:
            output = self._output(tool)
            if output is not None:
                try:
                    structured = output.dump(sendable(outcome.value, models=True), result)
                except Exception as exc:
                    logger.warning("structured content of %r failed: %r", tool.name, exc)
        meta = None
        if result.is_error and result.error_kind is not None:
            meta = {ERROR_KIND_META: result.error_kind.value}
        return mt.CallToolResult.model_validate(
            {
                "content": to_mcp_content(result),
                "structuredContent": structured,
                "isError": result.is_error,
                "_meta": meta,
            }
        )


def _search_definitions() -> list[mt.Tool]:
    """What a client lists under tool search: ``search_tools`` and ``call_tool``."""
    return [
        mt.Tool(
            name=SEARCH_TOOLS,
            description=(
                "Search the available tools (there are too many to list). Describe what "
                "you need, or give a regular expression; the matching tools' definitions "
                "come back. Run one with call_tool."
            ),
            input_schema=SEARCH_PARAMETERS,
            annotations=mt.ToolAnnotations(read_only_hint=True, destructive_hint=False),
        ),
        mt.Tool(
            name=CALL_TOOL,
            description=(
                "Run a tool that search_tools found: its name and its arguments (an object "
                "following the tool's inputSchema)."
            ),
            input_schema=_CALL_SCHEMA,
        ),
    ]


def _inner_call(params: mt.CallToolRequestParams) -> mt.CallToolRequestParams | mt.CallToolResult:
    """The call a ``call_tool`` call stands for (its approval answers kept), or the error
    result that says what is wrong with it."""
    arguments = params.arguments or {}
    name = arguments.get("name")
    if not isinstance(name, str) or not name:
        return _error_result(
            "call_tool needs 'name': the name of a tool that search_tools found, and "
            "'arguments': an object of its arguments"
        )
    if name in (SEARCH_TOOLS, CALL_TOOL):
        return _error_result(f"call_tool runs the tools search_tools finds, not {name!r}")
    inner = arguments.get("arguments", {})
    if inner is None:
        inner = {}
    if isinstance(inner, str):  # a model's JSON text of the object
        try:
            inner = json.loads(inner)
        except ValueError as exc:
            return _error_result(f"call_tool 'arguments' is not a JSON object: {exc}")
    if not isinstance(inner, dict):
        return _error_result(
            f"call_tool 'arguments' must be an object of {name!r}'s arguments, got "
            f"{type(inner).__name__}"
        )
    return params.model_copy(update={"name": name, "arguments": inner})


def _error_result(text: str) -> mt.CallToolResult:
    return mt.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": f"Error: {text}"}],
            "isError": True,
            "_meta": {ERROR_KIND_META: ErrorKind.INVALID_ARGUMENTS.value},
        }
    )


def _refused(outcome: ToolOutcome, why: str) -> ToolOutcome:
    """The outcome of an approval-needing call this client cannot ask the user about."""
    assert outcome.approval is not None
    text = (
        f"Error: the tool {outcome.approval.tool_name!r} needs the user's approval, and this "
        f"MCP client cannot ask the user ({why}). The call was not run.\nAsk the user to "
        "approve it in toolbridge, or to use a client that supports elicitation."
    )
    outcome.result = ToolResult.error(text, kind=ErrorKind.APPROVAL_DENIED)
    outcome.status = OutcomeStatus.ERROR
    return outcome


class _ProgressRelay:
    """Sends a call's progress as MCP notifications, in order, without blocking the tool."""

    def __init__(self, send: Callable[[float, float | None, str | None], Awaitable[None]]) -> None:
        self._send = send
        self._last: asyncio.Task[None] | None = None

    def __call__(self, progress: ToolProgress) -> None:
        previous = self._last

        async def send() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await self._send(progress.progress, progress.total, sendable(progress.message))

        self._last = asyncio.get_running_loop().create_task(send())

    async def flush(self) -> None:
        if self._last is not None:
            await asyncio.wait([self._last])


def _output_of(tool: Tool) -> _Output | None:
    """The output schema of a tool: its MCP server's, or a function tool's return type."""
    definition = getattr(tool, "definition", None)
    if isinstance(definition, mt.Tool):  # an MCP tool served on: keep its server's contract
        if definition.output_schema is None:
            return None
        return _Output(
            definition.output_schema, lambda _value, result: result.metadata.get(STRUCTURED_KEY)
        )
    if not isinstance(tool, FunctionTool):
        return None
    try:
        annotation = typing.get_type_hints(tool.fn).get("return")
    except Exception:
        return None
    if (
        annotation in (None, type(None), Any, str, bytes, object, ToolResult)
        or annotation is typing.NoReturn
    ):
        return None
    from pydantic import TypeAdapter

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema(mode="serialization")
    except Exception:
        return None
    if schema.get("type") == "object":
        return _Output(schema, lambda value, _result: adapter.dump_python(value, mode="json"))
    definitions = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
    }
    if definitions:
        wrapped["$defs"] = definitions
    return _Output(
        wrapped, lambda value, _result: {"result": adapter.dump_python(value, mode="json")}
    )


def _unsendable(token: str) -> str | None:
    """What makes `token` one no HTTP client can send in a header, or None."""
    if not token:
        return "is empty"
    if token != token.strip():  # HTTP trims header values: never matched
        return "has spaces around it"
    if any(ch < " " or ch == "\x7f" for ch in token):
        return "holds a control character"
    try:
        token.encode()
    except UnicodeEncodeError:  # a lone surrogate: a byte that is not UTF-8 in the argument
        return "is not UTF-8 text"
    return None


class _BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        unsendable = _unsendable(token)
        if unsendable is not None:
            raise ToolConfigError(
                f"the bearer token {unsendable}: no client could send it; give the token "
                "(--token) a non-empty value of UTF-8 text with no control characters and "
                "no spaces around it"
            )
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "unauthorized: send the header Authorization: Bearer <token>"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="toolbridge"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
