"""A raw JSON-RPC MCP server over stdio that sends hostile text (tests/cli/hostile_text.py).

``--fail-init``: answers ``initialize`` with an error whose message is the corpus.
Otherwise it lists a tool with a hostile name, one with a hostile description and
title, and answers every call with the corpus; it also writes the corpus to stderr.
``--lone-surrogate``: the description also holds a lone surrogate's JSON escape
(``"\udc80"``), which the MCP SDK's parser refuses. Run as
``python hostile_mcp_server.py [--fail-init] [--lone-surrogate]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from hostile_text import HOSTILE

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}
TOOLS = [
    {"name": "bad\x1b]0;t\x07[/x]", "inputSchema": OBJECT},
    {"name": "echo", "title": HOSTILE, "description": HOSTILE, "inputSchema": OBJECT},
]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": HOSTILE, "version": "1"},
            }
        }
    if method == "tools/list":
        if "--lone-surrogate" in sys.argv:
            return {"result": {"tools": [*TOOLS[:1], {**TOOLS[1], "description": "\udc80"}]}}
        return {"result": {"tools": TOOLS}}
    if method == "tools/call":
        return {"result": {"content": [{"type": "text", "text": HOSTILE}]}}
    return {"result": {}}


sys.stderr.write(HOSTILE + "\n")
sys.stderr.flush()
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    if "--fail-init" in sys.argv and message["method"] == "initialize":
        reply: dict[str, Any] = {"error": {"code": -32000, "message": HOSTILE}}
    else:
        reply = answer(message)
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
    sys.stdout.flush()
