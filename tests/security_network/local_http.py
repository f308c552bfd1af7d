"""A tiny real HTTP/1.1 server on 127.0.0.1 for the network tests, on the test's event loop.

Routes map a path to a `Reply`; every request is recorded (path and headers) so
tests can assert what reached the server, and what did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    endless: bool = False  # stream chunks until the client goes away
    hang: bool = False  # never answer


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]


class LocalHTTPServer:
    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Reply | Callable[[Recorded], Reply]] = {}
        self.requests: list[Recorded] = []
        self.bytes_sent = 0
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def origin(self) -> str:
        return f"{'https' if self._ssl else 'http'}://127.0.0.1:{self.port}"

    async def start(self) -> LocalHTTPServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *header_lines = head.split("\r\n")
        target = request_line.split(" ")[1]
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        recorded = Recorded(target, headers)
        self.requests.append(recorded)
        route = self.routes.get(target.split("?")[0], Reply(404, body=b"not found"))
        reply = route(recorded) if callable(route) else route
        if reply.hang:
            await asyncio.Event().wait()
        lines = [f"HTTP/1.1 {reply.status} X", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in reply.headers.items()]
        if not reply.endless:
            lines.append(f"Content-Length: {len(reply.body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body)
        await writer.drain()
        chunk = b"x" * 65536
        while reply.endless:
            writer.write(chunk)
            await writer.drain()
            self.bytes_sent += len(chunk)


async def running_servers() -> AsyncIterator[Callable[..., object]]:
    """Fixture body: a factory of started servers, all stopped at teardown."""
    servers: list[LocalHTTPServer] = []

    async def make(ssl_context: ssl.SSLContext | None = None) -> LocalHTTPServer:
        server = await LocalHTTPServer(ssl_context).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.stop()
