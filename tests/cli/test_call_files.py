"""`toolbridge call` over the file tools, as `make run` drives it."""

from __future__ import annotations

import json

import pytest
from tests.cli.conftest import Cli


@pytest.fixture
def cli(cli_in_process: Cli) -> Cli:
    """These tests check what a command prints and its exit code: run in this process
    (tests/cli/in_process.py), the same command gives the same output for less CPU."""
    return cli_in_process


def test_call_reads_a_range_in_the_current_directory(cli: Cli) -> None:
    (cli.workspace / "README.md").write_text("# title\nline two\nline three\n")
    done = cli("call", "read_file", '{"path": "README.md", "limit": "2"}')
    assert done.returncode == 0, done.stderr
    first, second, footer = done.stdout.splitlines()
    assert (first.split(), second.split()) == (["1", "#", "title"], ["2", "line", "two"])
    assert footer == "… lines 1-2 shown; README.md continues: read on with offset=3"
    assert "cast '2' -> 2" in done.stderr


def test_call_refuses_to_read_outside_and_says_so_on_stderr(cli: Cli) -> None:
    done = cli("call", "read_file", '{"path": "../../etc/passwd"}')
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("Error: '../../etc/passwd' is outside the workspace")
    assert "root:" not in done.stderr


def test_call_unknown_tool_error_goes_to_stderr(cli: Cli) -> None:
    done = cli("call", "no_such_tool", "{}")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("Error: unknown tool 'no_such_tool'.")


def test_call_json_prints_the_tool_result(cli: Cli) -> None:
    (cli.workspace / "a.txt").write_text("x\n")
    done = cli("call", "read_file", '{"path": "a.txt"}', "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "content": "     1\tx\n… line 1 shown; end of file (a.txt has 1 line)",
        "is_error": False,
        "error_kind": None,
        "metadata": {},
    }
    failed = cli("call", "read_file", '{"path": "missing.txt"}', "--json")
    assert failed.returncode == 1
    result = json.loads(failed.stdout)
    assert result["is_error"] is True and result["error_kind"] == "execution_error"
    assert result["content"].startswith("Error:")


def test_call_reads_arguments_from_stdin(cli: Cli) -> None:
    (cli.workspace / "a.txt").write_text("from stdin\n")
    done = cli("call", "read_file", "-", stdin='{"path": "a.txt"}')
    assert done.returncode == 0, done.stderr
    assert "from stdin" in done.stdout
    bad = cli("call", "read_file", "-", stdin=b"\xc3")
    assert bad.returncode == 2 and bad.stderr.startswith("Error: stdin: not UTF-8")


def test_workspace_option_points_the_tools_elsewhere(cli: Cli, tmp_path: object) -> None:
    (cli.workspace / "only-here.txt").write_text("found\n")
    elsewhere = cli.workspace.parent / "elsewhere"
    elsewhere.mkdir()
    done = cli(
        "call", "read_file", '{"path": "only-here.txt"}', "-w", str(cli.workspace), cwd=elsewhere
    )
    assert done.returncode == 0, done.stderr
    assert "found" in done.stdout


def test_tools_json_lists_sorted_definitions(cli: Cli) -> None:
    done = cli("tools", "--json")
    assert done.returncode == 0, done.stderr
    definitions = json.loads(done.stdout)
    names = [d["function"]["name"] for d in definitions]
    assert names == sorted(names, key=lambda n: (n.startswith("mcp_"), n))
    for name in ("read_file", "write_file", "edit_file", "list_dir", "glob", "grep"):
        assert name in names


def test_tool_output_cannot_drive_the_terminal(cli: Cli) -> None:
    (cli.workspace / "evil.txt").write_text("before\x1b]52;c;cHduZWQ=\x07after\x1b[2J\n")
    done = cli("call", "read_file", '{"path": "evil.txt"}')
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "before\\x1b]52;c;cHduZWQ=\\x07after\\x1b[2J" in done.stdout
    exact = json.loads(cli("call", "read_file", '{"path": "evil.txt"}', "--json").stdout)
    assert "\x1b]52;" in exact["content"]  # --json keeps the exact text, JSON-escaped


def test_a_missing_workspace_is_a_usage_error(cli: Cli) -> None:
    done = cli("tools", "--workspace", "no/such/dir")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "no/such/dir" in done.stderr
