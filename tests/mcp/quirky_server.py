"""A raw JSON-RPC MCP server over stdio that breaks the rules on purpose (no SDK checks).

It lists a tool whose schema omits ``"type": "object"``, one whose schema is not an
object schema, one that refers to a remote document, and one whose structured result
does not match its own ``outputSchema``, and one whose result has a lone surrogate in a
key. Run as ``python quirky_server.py``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

OUTPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = [
    {"name": "no_type", "inputSchema": {"properties": {"n": {"type": "integer"}}}},
    {"name": "a.string", "inputSchema": {"type": "string"}},
    {
        "name": "remote_ref",
        "inputSchema": {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/a"}}},
    },
    {"name": "liar", "inputSchema": {"type": "object"}, "outputSchema": OUTPUT},
    {"name": "lone_key", "inputSchema": {"type": "object"}},
]
# A lossy content block (a resource link) whose _meta has a lone surrogate in a key and a
# value: json.dumps writes each as the JSON escape "\udc80".
LONE_KEY = {
    "type": "resource_link",
    "uri": "file:///lone",
    "name": "lone",
    "_meta": {"k\udc80": "v\udc80", "nested": [{"\udc80": 1}]},
}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "quirky", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params["name"] == "liar":
        return {
            "content": [{"type": "text", "text": '{"n": "x"}'}],
            "structuredContent": {"n": "x"},
        }
    if method == "tools/call" and params["name"] == "lone_key":
        return {"content": [{"type": "text", "text": "linked"}, LONE_KEY]}
    if method == "tools/call":
        n = params.get("arguments", {}).get("n")
        return {"content": [{"type": "text", "text": f"n={n!r}"}]}
    return {}


if "--noisy" in sys.argv:  # a 200 kB line on stderr, then a short one
    sys.stderr.write("x" * 200_000 + "\nafter the long line\n")
    sys.stderr.flush()

for line in sys.stdin:
    message = json.loads(line)
    if "id" in message and "method" in message:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
