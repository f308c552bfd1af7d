"""The command line, run as a real subprocess over a real workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolbridge.cli", *args],
        cwd=cwd,
        input=stdin.read_text() if stdin is not None else None,
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


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_exec_runs_a_provider_response_and_answers_in_its_format(workspace: Path) -> None:
    (workspace / "README.md").write_text("".join(f"line {i}\n" for i in range(1, 20)))
    (workspace / "examples").mkdir()
    (workspace / "examples" / "note.txt").write_text("hi")
    done = run_cli("exec", str(EXAMPLES / "openai_chat_response.json"), cwd=workspace)
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)
    assert [m["tool_call_id"] for m in messages] == [
        "call_readme",
        "call_listing",
        "call_typo",
        "call_escape",
    ]
    assert all(m["role"] == "tool" for m in messages)
    readme, listing, typo, escape = (m["content"] for m in messages)
    assert "line 5" in readme and "line 6" not in readme  # "limit": "5" cast to 5
    assert "note.txt" in listing
    assert typo.startswith("Error: unknown tool 'functions.grep_files'. Did you mean 'grep'?")
    assert escape.startswith("Error:") and "outside the workspace" in escape
    assert "error (workspace_violation): read_file [call_escape]" in done.stderr


def test_exec_answers_anthropic_with_one_user_message(workspace: Path) -> None:
    (workspace / "README.md").write_text("a\nb\nc\nd\n")
    done = run_cli("exec", "-", cwd=workspace, stdin=(EXAMPLES / "anthropic_response.json"))
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)
    assert len(messages) == 1 and messages[0]["role"] == "user"
    blocks = messages[0]["content"]
    assert [b["tool_use_id"] for b in blocks] == ["toolu_readme", "toolu_glob"]
    assert all(b["type"] == "tool_result" for b in blocks)


def test_exec_refuses_what_is_not_a_provider_response(workspace: Path) -> None:
    bad = workspace / "bad.json"
    bad.write_text('{"hello": "world"}')
    done = run_cli("exec", str(bad), cwd=workspace)
    assert done.returncode == 2
    assert "cannot tell which provider" in done.stderr
