"""Edges found in review of the merged CLI work (issue 19): each case is what a user
typed, run as a real process, and must end in one ``Error:`` line with the documented
exit code, never ``internal error`` or a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.scripted_server import Reply, ScriptedServer, openai_chat_stream, serve
from tests.agent.test_cli import agent
from tests.agent.test_cli_behaves import bare


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8000/v1\x1b]0;title\x07", "space or control character"),
        ("http://127.0.0.1:8000/v1\t", "space or control character"),
        ("http://exa mple/v1", "space or control character"),
        ("http://[::1]x/v1", "after its IPv6 host, not a port"),
    ],
)
def test_a_base_url_the_http_client_refuses_is_a_usage_error(
    tmp_path: Path, url: str, reason: str
) -> None:
    # urlsplit accepts these; the SDK's HTTP client refused them as 'internal error:
    # InvalidURL' (exit 4), and a space became a connection error to a host nobody named.
    done = bare(tmp_path, "--base-url", url, "--model", "openai:gpt-test")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: --base-url ") and reason in line, line
    assert "\x1b" not in line and "internal error" not in line


def _toolbridge(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "toolbridge", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_mcp_serve_http_takes_an_ipv6_host_in_brackets(tmp_path: Path) -> None:
    # '[::1]:0' was bound as the name '[::1]' ('Name or service not known'), after a
    # warning that [::1] is served without --token, though it is the loopback address.
    process = _toolbridge("mcp", "serve", "--http", "[::1]:0", cwd=tmp_path)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()  # the process's first line: served, or why not
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert first.startswith("serving MCP on http://[::1]:"), first


def test_mcp_serve_http_with_an_unclosed_bracket_is_a_usage_error(tmp_path: Path) -> None:
    process = _toolbridge("mcp", "serve", "--http", "[::1", cwd=tmp_path)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2, stderr
    assert "expected [IPv6 host]:PORT" in stderr and "warning" not in stderr


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (("exec",), 2, "Error: stdin: empty"),
        (("call", "read_file", "-"), 1, "missing required key 'path'"),
    ],
)
def test_a_closed_stdin_reads_as_empty_input(
    tmp_path: Path, args: tuple[str, ...], code: int, said: str
) -> None:
    # `toolbridge exec <&-`: Python leaves sys.stdin None, which was 'internal error:
    # AttributeError' (exit 4), and the agent's prompt a traceback.
    command = [sys.executable, "-m", "toolbridge", *args]
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == code, done.stderr
    assert said in done.stderr and "internal error" not in done.stderr


def test_agent_with_a_closed_stdin_ends_its_session_at_once(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "toolbridge", "agent", "--no-skills"]
    command += ["--model", "openai:gpt-test", "--base-url", "http://127.0.0.1:9/v1"]
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" <&-', "sh", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_a_model_servers_error_of_several_lines_is_one_error_line(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # The server's message was printed as it came: 'Error: first' and 'second' on a line
    # of its own, where every problem is one line starting with 'Error:' (cli.md).
    message = "first\nsecond\n\nthird"
    server.add(Reply(400, {"error": {"message": message, "type": "invalid_request_error"}}))
    done = agent(server.url, tmp_path, "hi")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: ") and "first second third" in line, line


def test_mcp_serve_verbose_shows_each_log_record_once(tmp_path: Path) -> None:
    # With -v, toolbridge's records went to the command's handler and, propagated, to
    # the root handler 'mcp serve' sets up: every warning twice, in two formats.
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": str(tmp_path / "none")}}}))
    process = _toolbridge("mcp", "serve", "-v", "--servers", str(config), cwd=tmp_path)
    _, stderr = process.communicate(timeout=120)  # stdin is empty: serving ends at once
    attempts = [line for line in stderr.splitlines() if "(attempt 1;" in line]
    assert len(attempts) == 1, stderr


def test_an_agent_session_fed_by_a_pipe_prints_the_answers_only(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # `printf 'q1\nq2\n' | toolbridge agent > answers.txt` had a '> ' prompt before each
    # answer and one at the end: prompts are for a person at a terminal.
    server.add(openai_chat_stream(text="Hello."), openai_chat_stream(text="Still here."))
    done = agent(server.url, tmp_path, stdin="hi\nare you there?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello.\nStill here.\n"


def test_agent_session_where_the_control_folder_is_a_file_is_one_error(tmp_path: Path) -> None:
    # A file named .toolbridge: the session lock's open raised FileExistsError, shown
    # as 'internal error' (exit 4, "a bug in toolbridge") for a workspace problem.
    (tmp_path / ".toolbridge").write_text("not a folder")
    done = agent("http://127.0.0.1:9", tmp_path, "hi", "--session", "s1")
    assert done.returncode == 3, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: toolbridge's folder") and ".toolbridge" in line
    assert "is not a directory" in line
    assert "internal error" not in line


def test_bedrock_with_a_base_url_and_no_region_is_one_error(tmp_path: Path) -> None:
    # With --base-url the provider built its boto3 client itself, outside the adapter's
    # check: botocore's NoRegionError came out as 'internal error' (exit 4).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path)  # no ~/.aws/config to take a region from
    command = [sys.executable, "-m", "toolbridge", "agent", "hi", "--no-skills"]
    command += ["--model", "bedrock:some-model", "--base-url", "http://127.0.0.1:9/v1"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: cannot make a Bedrock client") and "AWS_REGION" in line, line


def test_a_port_out_of_range_in_openai_base_url_is_one_line(tmp_path: Path) -> None:
    # OPENAI_BASE_URL with a port out of range: the SDK's OverflowError reached the
    # command inside an ExceptionGroup, and the run, outside `reporting`, printed a
    # 60-line traceback; then it was one 'internal error' line. Now the variable is
    # checked as --base-url is (tests/cli/test_base_url_variables.py): a usage error.
    env = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:99999/v1"}
    command = [sys.executable, "-m", "toolbridge", "agent", "hi", "--no-skills"]
    done = subprocess.run(
        [*command, "--model", "openai:gpt-test"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: OPENAI_BASE_URL ") and "Port out of range" in line, line


@pytest.mark.parametrize("value", ["1e400", "Infinity", "NaN"])
def test_an_mcp_servers_time_limit_that_is_no_number_is_refused(tmp_path: Path, value: str) -> None:
    # JSON reads 1e400 and Infinity as inf, NaN as nan: 'positive' let them through, and
    # 'connect_timeout': 1e400 with a server that never answers hung 'mcp servers'.
    for key in ("timeout", "connect_timeout"):
        config = tmp_path / "servers.json"
        config.write_text(f'{{"mcpServers": {{"s": {{"command": "sh", "{key}": {value}}}}}}}')
        process = _toolbridge("mcp", "servers", str(config), cwd=tmp_path)
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 2, stderr
        assert f"'{key}' must be a positive number of seconds" in stderr


@pytest.mark.parametrize("value", ["-5", "0", "nan"])
def test_mcp_serve_timeout_that_is_no_time_limit_is_a_usage_error(
    tmp_path: Path, value: str
) -> None:
    # -5 and 0 printed ExecutionPolicy's ValueError as a traceback; nan was taken, and
    # every call then 'did not finish within its time limit of nan s'.
    process = _toolbridge("mcp", "serve", "--timeout", value, cwd=tmp_path)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2, stderr
    [line] = stderr.splitlines()
    assert line.startswith("Error: --timeout ") and "positive number of seconds" in line


def test_a_nan_default_timeout_in_the_config_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "nan.toml").write_text("[executor]\ndefault_timeout = nan\n")
    process = _toolbridge("call", "list_dir", "{}", "-c", "nan.toml", cwd=tmp_path)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 3, stderr
    assert "default_timeout must be > 0" in stderr and "nan" in stderr


def test_a_lone_surrogate_in_the_models_answer_is_shown_escaped(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # JSON lets a model send "\ud800": printing it raised UnicodeEncodeError inside
    # rich (exit 2, 'Error: utf-8 codec can't encode', the answer lost).
    server.add(openai_chat_stream(text="a\ud800b [/x]"))
    done = agent(server.url, tmp_path, "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a\\ud800b [/x]\n"
