"""A schema's $schema or $ref never makes registration reach the network (SSRF, hangs)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolbridge import Tool, ToolDefinitionError, ToolRegistry, tool_parameters


@pytest.fixture
def listener() -> Iterator[tuple[int, list[int]]]:
    """A TCP port on 127.0.0.1 that counts the connections it gets."""
    hits: list[int] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            hits.append(1)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join()
    server.close()


def make_tool(schema: dict[str, Any]) -> Tool:
    @tool_parameters(schema)
    class Remote(Tool):
        name = "remote"
        description = "Has a schema pointing elsewhere."

        async def execute(self, **kwargs: Any) -> str:
            return "ran"

    return Remote()


def remote_meta(base: str) -> dict[str, Any]:
    return {"$schema": f"{base}/meta"}


def remote_ref(base: str) -> dict[str, Any]:
    return {"properties": {"a": {"$ref": f"{base}/defs.json"}}}


@pytest.mark.parametrize(
    ("shape", "message"),
    [(remote_meta, "unknown \\$schema"), (remote_ref, "cannot be compiled")],
)
def test_remote_schemas_are_refused_without_a_connection(
    listener: tuple[int, list[int]], shape: Callable[[str], dict[str, Any]], message: str
) -> None:
    port, hits = listener
    schema = {"type": "object", **shape(f"http://127.0.0.1:{port}")}
    with pytest.raises(ToolDefinitionError, match=message):
        ToolRegistry([make_tool(schema)])
    assert hits == []  # nothing was fetched


def test_standard_meta_schemas_still_work() -> None:
    for uri in (
        "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#",
    ):
        registry = ToolRegistry([make_tool({"$schema": uri, "type": "object"})])
        assert registry.prepare_call("remote", {}).error is None
