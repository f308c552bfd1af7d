"""``toolbridge mcp serve`` with a plugin whose description, result, structured content
and progress hold lone surrogates, and a file whose name is not UTF-8, driven by the
official SDK's client over stdio. A lone surrogate cannot be written by any transport
(pydantic: 'surrogates not allowed'): one in a result ended the whole server, and the
client waited for an answer that never came. Each is now sent as the six characters
``\\udc80``, as ``--json`` and the agent write it."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import mcp_types as mt
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]

PLUGIN = r'''
    from dataclasses import dataclass
    from typing import Annotated

    from pydantic import Field
    from toolbridge import report_progress, tool

    @tool(read_only=True)
    async def lone(path: str = "x") -> str:
        """Returns caf\udce9 for the path given."""
        report_progress(1, 1, "at caf\udce9")
        return path + ": caf\udce9 and \ud800 but \U0001f600 is whole"

    @tool(read_only=True)
    def lone_schema(mode: Annotated[str, Field(description="the mode \udc80")] = "x\ud800") -> str:
        """Takes a mode whose description and default hold a lone surrogate."""
        return mode

    @tool(read_only=True)
    def lone_dict() -> dict[str, str]:
        """Returns a mapping whose key and value hold a lone surrogate."""
        return {"k\udce9": "v\ud800"}

    @dataclass
    class Record:
        name: str
        tags: dict[str, str]

    @tool(read_only=True)
    def lone_record() -> Record:
        """Returns a dataclass whose name and a key of its mapping hold a lone surrogate."""
        return Record("caf\udce9", {"k\udce9": "v"})
'''


def _install(site: Path) -> None:
    (site / "lone_plugin.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "lone_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lone_plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[toolbridge.tools]\nlone = lone_plugin:lone\nlone_dict = lone_plugin:lone_dict\n"
        "lone_schema = lone_plugin:lone_schema\nlone_record = lone_plugin:lone_record\n"
    )


def _text(result: mt.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, mt.TextContent))


async def test_lone_surrogates_are_served_as_text(
    parts: Any, workspace: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site)
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("hello\n")
    served = parts.toolbridge(workspace)
    server = StdioServerParameters(
        command=served["command"],
        args=served["args"],
        # this checkout's toolbridge, not the one the command was installed from
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO / "src"), *sys.path]),
        },
    )
    reports: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(message)

    # 60 s: a bound on the hang this was (the client waited forever), not a timing
    async with asyncio.timeout(60), Client(server, mode="legacy") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["lone"].description == "Returns caf\\udce9 for the path given."
        # a schema holding one registers (jsonschema-rs refused it: the server did not start)
        [mode] = listed["lone_schema"].input_schema["properties"].values()
        assert mode["description"] == "the mode \\udc80" and mode["default"] == "x\\ud800"
        chosen = await client.call_tool("lone_schema", {"mode": mode["default"]})
        assert _text(chosen) == "x\\ud800"
        done = await client.call_tool("lone", {"path": "p"}, progress_callback=on_progress)
        assert _text(done) == "p: caf\\udce9 and \\ud800 but \U0001f600 is whole"
        assert reports == ["at caf\\udce9"]
        mapping = await client.call_tool("lone_dict", {})
        assert not mapping.is_error, _text(mapping)
        assert mapping.structured_content == {"k\\udce9": "v\\ud800"}
        # a dataclass is escaped before pydantic dumps it (which wrote a key's lone
        # surrogate as U+FFFD): its key reads as the six characters, as a mapping's does
        record = await client.call_tool("lone_record", {})
        assert not record.is_error, _text(record)
        assert record.structured_content == {"name": "caf\\udce9", "tags": {"k\\udce9": "v"}}
        listing = await client.call_tool("list_dir", {})
        assert "caf\\xe9.txt  (6 B)" in _text(listing).splitlines()
        read = await client.call_tool("read_file", {"path": "caf\\xe9.txt"})
        assert "hello" in _text(read)
