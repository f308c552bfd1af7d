"""A raw JSON-RPC MCP server over stdio that never answers a tool call.

It answers ``initialize`` and ``tools/list`` (one tool, ``wait``), takes ``tools/call``
and says nothing. Each request and notification method it receives is appended to the
file named by its first argument, so a test can see the call arrive and be cancelled.
Run as ``python silent_server.py LOG``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [{"name": "wait", "inputSchema": {"type": "object"}}]


def answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "silent", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return None  # never answered
    return {}


log = sys.argv[1]
for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method is None:
        continue
    with open(log, "a", encoding="utf-8") as out:
        out.write(method + "\n")
    if "id" in message:
        result = answer(method, message.get("params") or {})
        if result is not None:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
