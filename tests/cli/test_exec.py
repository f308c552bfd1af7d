"""`toolbridge exec`: a provider response in, the result messages out in the same format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.conftest import EXAMPLES, Cli, assert_one_line_error


@pytest.fixture
def cli(cli_in_process: Cli) -> Cli:
    """These tests check what a command prints and its exit code: run in this process
    (tests/cli/in_process.py), the same command gives the same output for less CPU."""
    return cli_in_process


def test_exec_runs_a_provider_response_and_answers_in_its_format(cli: Cli) -> None:
    (cli.workspace / "README.md").write_text("".join(f"line {i}\n" for i in range(1, 20)))
    (cli.workspace / "examples").mkdir()
    (cli.workspace / "examples" / "note.txt").write_text("hi")
    done = cli("exec", str(EXAMPLES / "openai_chat_response.json"))
    assert done.returncode == 1, done.stderr  # two calls fail on purpose
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
    lines = done.stderr.splitlines()
    assert lines[0] == "ok: read_file [call_readme]  repaired: $.limit '5' -> 5"
    assert lines[2].startswith("error (unknown_tool): functions.grep_files [call_typo]")
    assert "Did you mean 'grep'?" in lines[2]
    assert lines[3].startswith("error (workspace_violation): read_file [call_escape]")


def test_exec_answers_anthropic_with_one_user_message(cli: Cli) -> None:
    (cli.workspace / "README.md").write_text("a\nb\nc\nd\n")
    done = cli("exec", "-", stdin=(EXAMPLES / "anthropic_response.json").read_text())
    assert done.returncode == 0, done.stderr  # every call succeeded
    messages = json.loads(done.stdout)
    assert len(messages) == 1 and messages[0]["role"] == "user"
    blocks = messages[0]["content"]
    assert [b["tool_use_id"] for b in blocks] == ["toolu_readme", "toolu_glob"]
    assert all(b["type"] == "tool_result" for b in blocks)


def test_exec_reads_stdin_when_no_file_is_given_and_stdin_is_a_pipe(cli: Cli) -> None:
    (cli.workspace / "README.md").write_text("a\n")
    done = cli("exec", stdin=(EXAMPLES / "anthropic_response.json").read_text())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["role"] == "user"


def test_exec_without_a_file_on_a_terminal_prints_usage_instead_of_waiting(cli: Cli) -> None:
    done = cli("exec", tty_input="")
    assert done.returncode == 2
    assert "Usage:" in done.stderr and "exec" in done.stderr
    assert done.stdout == ""


def test_exec_exits_1_when_any_call_failed(cli: Cli) -> None:
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}],
        "stop_reason": "tool_use",
    }
    done = cli("exec", "-", stdin=json.dumps(response))
    assert done.returncode == 1
    assert done.stderr.startswith("error (invalid_arguments): read_file [t1]")
    assert json.loads(done.stdout)[0]["content"][0]["is_error"] is True


def test_exec_format_is_checked_and_used(cli: Cli) -> None:
    done = cli("exec", str(EXAMPLES / "anthropic_response.json"), "--format", "openai_chat")
    assert_one_line_error(done, 2, "anthropic_response.json")
    bad = cli("exec", str(EXAMPLES / "anthropic_response.json"), "--format", "nope")
    assert bad.returncode == 2 and "'nope' is not one of" in bad.stderr


def test_exec_refuses_what_is_not_a_provider_response(cli: Cli) -> None:
    bad = cli.workspace / "bad.json"
    bad.write_text('{"hello": "world"}')
    done = cli("exec", str(bad))
    assert_one_line_error(done, 2, "bad.json", "cannot tell which provider")


def test_exec_input_errors_are_one_line_with_exit_code_2(cli: Cli, tmp_path: Path) -> None:
    (cli.workspace / "latin1.json").write_bytes(b'{"a": "caf\xe9"}')
    (cli.workspace / "broken.json").write_text('{"choices": [}')
    (cli.workspace / "empty.json").write_text("  \n")
    cases = {
        "missing.json": "missing.json: no such file",
        str(tmp_path): "is a directory",
        "latin1.json": "latin1.json: not UTF-8 text (byte 0xe9 at offset 10)",
        "broken.json": "broken.json: not valid JSON",
        "empty.json": "empty.json: empty",
    }
    for source, expected in cases.items():
        assert_one_line_error(cli("exec", source), 2, expected)
    assert_one_line_error(cli("exec", "-", stdin=b"\xff"), 2, "stdin: not UTF-8")


def test_exec_hostile_json_is_an_input_error_not_an_internal_one(cli: Cli) -> None:
    # Deep nesting raised RecursionError and a 5,000-digit integer a ValueError: both
    # were reported as an internal error (exit 4) instead of bad input (exit 2).
    (cli.workspace / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (cli.workspace / "digits.json").write_text('{"choices": [], "n": ' + "9" * 5000 + "}")
    assert_one_line_error(cli("exec", "deep.json"), 2, "deep.json: not valid JSON", "deeply")
    assert_one_line_error(cli("exec", "digits.json"), 2, "digits.json: not valid JSON", "4300")


def test_a_model_chosen_tool_name_cannot_drive_the_terminal(cli: Cli) -> None:
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "x\x1b]0;pwned\x07", "input": {}}],
        "stop_reason": "tool_use",
    }
    done = cli("exec", "-", stdin=json.dumps(response))
    assert done.returncode == 1
    assert "\x1b" not in done.stderr and "\x1b" not in done.stdout
    assert "x\\x1b]0;pwned\\x07" in done.stderr


def test_a_response_without_calls_says_so(cli: Cli) -> None:
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "All done."}],
        "stop_reason": "end_turn",
    }
    done = cli("exec", "-", stdin=json.dumps(response))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "stdin: the response has no tool calls\n"
    assert json.loads(done.stdout) == []
