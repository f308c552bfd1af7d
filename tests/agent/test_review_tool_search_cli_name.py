"""Review: a plugin tool named ``tool_search`` crashed ``toolbridge agent`` by default.

Tool search is on by default, and on a model without the provider's own search it adds
a ``tool_search`` tool: a workspace that already had one (13 tools, nothing would be
deferred) got a traceback and exit 1 instead of a one-line error naming the flag.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.agent.scripted_server import ScriptedServer, openai_chat_stream

REPO = Path(__file__).resolve().parents[2]

PLUGIN = """
from toolbridge import tool


def tool_search(query: str) -> str:
    \"\"\"Search the company's own catalog.\"\"\"
    return f"catalog: {query}"


TOOLS = [tool(tool_search)]
"""


def agent(server: ScriptedServer, workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = workspace.parent / "site"
    site.mkdir(exist_ok=True)
    (site / "catalog_plugin.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "catalog_plugin-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: catalog_plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[toolbridge.tools]\ncat = catalog_plugin:TOOLS\n")
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "HOME": str(workspace.parent)}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO / "src"), *sys.path])
    command = [sys.executable, "-m", "toolbridge", "agent", "Hello.", *args, "--no-skills"]
    command += ["--model", "openai:gpt-test", "--base-url", f"{server.url}/v1"]
    command += ["--workspace", str(workspace)]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_tool_named_tool_search_is_a_config_error_naming_the_flag(
    server: ScriptedServer, workspace: Path
) -> None:
    done = agent(server, workspace)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: a tool named 'tool_search' is already registered")
    assert "--no-tool-search" in line
    assert server.requests == []


def test_no_tool_search_runs_with_that_tool(server: ScriptedServer, workspace: Path) -> None:
    server.add(openai_chat_stream(text="Hi."))
    done = agent(server, workspace, "--no-tool-search")
    assert done.returncode == 0, done.stderr
    sent = [t["function"]["name"] for t in server.bodies()[0]["tools"]]
    assert "tool_search" in sent and "read_file" in sent
