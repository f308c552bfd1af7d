"""``toolbridge agent`` defers a large tool set by default (``--no-tool-search`` sends
every definition): a real subprocess with a real plugin, against a scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.agent.scripted_server import ScriptedServer, openai_chat_stream

REPO = Path(__file__).resolve().parents[2]

PLUGIN = """
from toolbridge import tool


def _record(number):
    def read(id: str) -> str:
        return f"record {number}: {id}"

    read.__name__ = f"crm_record_{number:02d}"
    read.__doc__ = f"Read CRM record number {number} of the sales pipeline."
    return tool(read)


TOOLS = [_record(n) for n in range(30)]
"""


def install_plugin(site: Path) -> None:
    site.mkdir()
    (site / "crm_plugin.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "crm_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: crm_plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[toolbridge.tools]\ncrm = crm_plugin:TOOLS\n")


def agent(server: ScriptedServer, workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = workspace.parent / "site"
    if not site.exists():
        install_plugin(site)
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "HOME": str(workspace.parent)}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO / "src"), *sys.path])
    command = [sys.executable, "-m", "toolbridge", "agent", *args, "--json", "--no-skills"]
    command += ["--model", "openai:gpt-test", "--base-url", f"{server.url}/v1"]
    command += ["--workspace", str(workspace)]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )


def names(body: dict[str, object]) -> list[str]:
    tools = body.get("tools", [])
    assert isinstance(tools, list)
    return [tool["function"]["name"] for tool in tools]


def test_agent_defers_a_large_tool_set_by_default(server: ScriptedServer, workspace: Path) -> None:
    server.add(
        openai_chat_stream(calls=[("s1", "tool_search", '{"query": "crm record 7", "limit": 1}')]),
        openai_chat_stream(calls=[("c1", "crm_record_07", '{"id": "x"}')]),
        openai_chat_stream(text="Record 7 is x."),
    )
    done = agent(server, workspace, "Read record 7.", "--yes")
    assert done.returncode == 0, done.stderr
    first, second, third = server.bodies()
    assert names(first) == ["tool_search"]  # 40 tools: past 30, all deferred
    assert names(second) == ["tool_search", "crm_record_07"]
    assert names(third) == names(second)
    finished = [json.loads(line) for line in done.stdout.splitlines()]
    results = [e["result"] for e in finished if e["type"] == "tool_finished"]
    assert results[-1] == "record 7: x"


def test_no_tool_search_sends_every_definition(server: ScriptedServer, workspace: Path) -> None:
    server.add(openai_chat_stream(text="Hi."))
    done = agent(server, workspace, "Hello.", "--no-tool-search")
    assert done.returncode == 0, done.stderr
    sent = names(server.bodies()[0])
    assert "tool_search" not in sent and "crm_record_29" in sent and "read_file" in sent
    assert len(sent) >= 40
