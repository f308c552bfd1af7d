"""MCP benchmark: tools/call round trips per second, server side and client side.

Run it from the repository root in the project's environment (the ``mcp`` extra):

    python bench/mcp_bench.py            # prints the tables and updates docs/benchmarks.md
    python bench/mcp_bench.py --no-docs  # prints only

Server side: the same small tool (``add(a: int, b: int) -> int``) served by toolbridge's
`MCPToolServer` and by the SDK's high-level `MCPServer` (FastMCP), each in its own
process, over stdio and over streamable HTTP on 127.0.0.1, and in this process over the
SDK's memory streams (no process scheduling noise), called by the same SDK client.
Target: toolbridge's server at least as fast as the SDK's.

Client side: one SDK server process and one connection; a call through toolbridge's MCP
tool (`ToolExecutor.run` of ``mcp_bench_add``: preparation, validation, scheduling, the
SDK call, result conversion) next to a bare `ClientSession.call_tool` on the same
session. Target: toolbridge's overhead at most 10% over the bare session.

Rounds of --calls sequential calls alternate between the contenders in one run; the
table shows the median round (and the range). Not a test: the test suite never runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import os
import platform
import re
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## MCP"
ARGS = {"a": 1, "b": 2}


# --- the servers (run in a child process: ``python mcp_bench.py serve KIND TRANSPORT PORT``)


def toolbridge_server() -> Any:
    from toolbridge import ToolRegistry, tool
    from toolbridge.mcp import MCPToolServer

    @tool(read_only=True)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return MCPToolServer(ToolRegistry([add]), name="bench")


def sdk_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    sdk = MCPServer("bench", log_level="WARNING")

    @sdk.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return sdk


def serve(kind: str, transport: str, port: int) -> None:
    if kind == "toolbridge":
        server = toolbridge_server()
        if transport == "stdio":
            asyncio.run(server.run_stdio())
        else:
            asyncio.run(server.run_http("127.0.0.1", port))
        return
    sdk = sdk_server()
    if transport == "stdio":
        sdk.run()
    else:
        asyncio.run(sdk.run_streamable_http_async(host="127.0.0.1", port=port))


# --- clients ---------------------------------------------------------------------------


@functools.cache
def _devnull() -> Any:
    """Where the server processes' stderr goes (opened once, for the whole run)."""
    return open(os.devnull, "w")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _command(kind: str, transport: str, port: int = 0) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "serve", kind, transport, str(port)]


@asynccontextmanager
async def sdk_client(kind: str, transport: str) -> AsyncIterator[Any]:
    """An SDK `Client` connected to a fresh server process of `kind` over `transport`."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        if transport == "memory":  # in this process, over the SDK's memory streams
            server = toolbridge_server().server if kind == "toolbridge" else sdk_server()
            client = Client(server, mode="legacy", cache=None)
        elif transport == "stdio":
            command = _command(kind, "stdio")
            params = StdioServerParameters(command=command[0], args=command[1:])
            client = Client(stdio_client(params, errlog=_devnull()), mode="legacy", cache=None)
        else:
            port = _free_port()
            command = _command(kind, "http", port)
            process = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
            )
            stack.push_async_callback(_stop, process)
            await _wait_for_port(port)
            url = f"http://127.0.0.1:{port}/mcp"
            client = Client(streamable_http_client(url), mode="legacy", cache=None)
        yield await stack.enter_async_context(client)


async def _stop(process: asyncio.subprocess.Process) -> None:
    process.terminate()
    await process.wait()


async def _wait_for_port(port: int) -> None:
    async with asyncio.timeout(30):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            return


@asynccontextmanager
async def toolbridge_client() -> AsyncIterator[tuple[Callable[[], Awaitable[Any]], Any]]:
    """A call through toolbridge's MCP tool (executor path) to an SDK server process, and
    the SDK session underneath it, for the bare calls over the very same connection."""
    from toolbridge import ToolCallRequest, ToolRegistry
    from toolbridge.execution.executor import ToolExecutor
    from toolbridge.mcp import MCPClient

    command = _command("sdk", "stdio")
    registry = ToolRegistry()
    config = {"mcpServers": {"bench": {"command": command[0], "args": command[1:]}}}
    async with MCPClient(config, registry) as mcp:
        executor = ToolExecutor(registry)
        calls = [ToolCallRequest("b1", "mcp_bench_add", ARGS)]

        async def call() -> Any:
            (outcome,) = await executor.run(calls)
            assert outcome.ok, outcome.result.text
            return outcome

        client = mcp.connections["bench"].client
        assert client is not None
        yield call, client.session


async def _rounds(
    contenders: dict[str, Callable[[], Awaitable[Any]]], calls: int, rounds: int
) -> dict[str, list[float]]:
    """Calls per second of each contender, round by round, alternating."""
    for call in contenders.values():  # warm up
        for _ in range(20):
            await call()
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, call in contenders.items():
            start = time.perf_counter()
            for _ in range(calls):
                await call()
            rates[name].append(calls / (time.perf_counter() - start))
    return rates


Paired = tuple[list[float], list[float]]


async def paired(
    first: Callable[[], Awaitable[Any]], second: Callable[[], Awaitable[Any]], calls: int
) -> tuple[list[float], list[float]]:
    """Latencies (µs) of `first` and `second`, alternating call by call: drift in the
    machine's load hits both alike, so their difference is the cost of `first`'s extra
    layers. Which one goes first alternates too: the first call of a pair pays for waking
    the loop up (about 0.1 ms here), which would otherwise count against one side."""
    a: list[float] = []
    b: list[float] = []
    for index in range(calls):
        pair = ((first, a), (second, b))
        for call, into in pair if index % 2 == 0 else pair[::-1]:
            start = time.perf_counter()
            await call()
            into.append((time.perf_counter() - start) * 1e6)
    return a, b


async def server_side(
    transport: str, calls: int, rounds: int
) -> tuple[dict[str, list[float]], Paired]:
    async with sdk_client("toolbridge", transport) as ours, sdk_client("sdk", transport) as theirs:

        async def call_ours() -> Any:
            result = await ours.call_tool("add", ARGS)
            assert not result.is_error
            return result

        async def call_theirs() -> Any:
            result = await theirs.call_tool("add", ARGS)
            assert not result.is_error
            return result

        rates = await _rounds(
            {"toolbridge MCPToolServer": call_ours, "SDK MCPServer (FastMCP)": call_theirs},
            calls,
            rounds,
        )
        return rates, await paired(call_ours, call_theirs, calls * rounds)


async def client_side(calls: int, rounds: int) -> tuple[dict[str, list[float]], Paired]:
    async with toolbridge_client() as (through_toolbridge, session):

        async def call_bare() -> Any:
            result = await session.call_tool("add", ARGS)
            assert not result.is_error
            return result

        rates = await _rounds(
            {
                "toolbridge MCP tool (ToolExecutor.run)": through_toolbridge,
                "bare ClientSession.call_tool": call_bare,
            },
            calls,
            rounds,
        )
        return rates, await paired(through_toolbridge, call_bare, calls * rounds)


# --- report ----------------------------------------------------------------------------


def report(
    results: dict[str, tuple[dict[str, list[float]], Paired]], calls: int, rounds: int
) -> str:
    lines = [
        SECTION,
        "",
        f"`python bench/mcp_bench.py` on {datetime.date.today()}, Python "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, load "
        f"average {os.getloadavg()[0]:.1f} at the end. Rounds: {rounds} rounds of {calls} "
        "sequential `tools/call` round trips per contender, alternating; calls per second "
        "(higher is better). Paired: the two contenders' calls alternate one by one "
        f"({rounds * calls} each), so the machine's load drift hits both alike; the targets "
        "use the paired medians (rounds of one contender vary several-fold on this shared "
        "machine).",
        "",
    ]
    targets = []
    for title, (rates, (first, second)) in results.items():
        names = list(rates)
        lines += [
            f"### {title}",
            "",
            "| Contender | rounds: best | median | worst | paired: median latency (µs) |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, latencies in zip(names, (first, second), strict=True):
            values = rates[name]
            lines.append(
                f"| {name} | {max(values):,.0f} | {statistics.median(values):,.0f} | "
                f"{min(values):,.0f} | {statistics.median(latencies):,.0f} |"
            )
        lines.append("")
        ours, theirs = statistics.median(first), statistics.median(second)
        extra = statistics.median([a - b for a, b in zip(first, second, strict=True)])
        if title.startswith("Server"):
            speed = theirs / ours
            met = "yes" if speed >= 1 else "par (within 3%)" if speed >= 0.97 else "no"
            targets.append(
                f"| {title}: toolbridge ≥ the SDK's MCPServer | {speed:.2f}x "
                f"({extra:+,.0f} µs a call) | {met} |"
            )
        else:
            overhead = extra / theirs * 100
            targets.append(
                f"| {title}: overhead ≤ 10% over the bare session | {overhead:+.1f}% "
                f"({extra:+,.0f} µs of {theirs:,.0f}) | {'yes' if overhead <= 10 else 'no'} |"
            )
    lines += ["### Targets (issue 11)", "", "| Target | Measured | Met |", "| --- | --- | --- |"]
    lines += targets
    return "\n".join(lines) + "\n"


def write_docs(section: str) -> None:
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text, encoding="utf-8")


async def main(args: argparse.Namespace) -> None:
    results = {
        "Server side, stdio": await server_side("stdio", args.calls, args.rounds),
        "Server side, streamable HTTP": await server_side("http", args.calls, args.rounds),
        "Server side, in process": await server_side("memory", args.calls, args.rounds),
        "Client side, stdio": await client_side(args.calls, args.rounds),
    }
    section = report(results, args.calls, args.rounds)
    print(section)
    if not args.no_docs:
        write_docs(section)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
        parser.add_argument("--calls", type=int, default=200)
        parser.add_argument("--rounds", type=int, default=9)
        parser.add_argument("--no-docs", action="store_true")
        os.chdir(tempfile.mkdtemp(prefix="mcp-bench-"))  # result files, if any, go there
        asyncio.run(main(parser.parse_args()))
