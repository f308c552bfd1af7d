"""The command line, run as a real subprocess over a real workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tools_json_lists_sorted_definitions(workspace: Path) -> None:
    done = run_cli("tools", "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    definitions = json.loads(done.stdout)
    names = [d["function"]["name"] for d in definitions]
    assert names == sorted(names, key=lambda n: (n.startswith("mcp_"), n))
    assert all(d["type"] == "function" for d in definitions)


def test_call_reports_errors_and_exits_non_zero(workspace: Path) -> None:
    done = run_cli("call", "no_such_tool", "{}", cwd=workspace)
    assert done.returncode == 1
    assert done.stdout.startswith("Error: unknown tool 'no_such_tool'.")
