"""What the command line reads has limits: nesting and size past them is a one-line error
saying which limit, never a RecursionError, a traceback or a process filling its memory.
"""

from __future__ import annotations

import json

import pytest
from tests.cli.conftest import Cli, assert_one_line_error

from toolbridge.cli.config import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH
from toolbridge.cli.inputs import MAX_INPUT_BYTES
from toolbridge.formats.wire import MAX_DEPTH


@pytest.fixture
def cli(cli_in_process: Cli) -> Cli:
    """These tests check what a command prints and its exit code: run in this process
    (tests/cli/in_process.py), the same command gives the same output for less CPU."""
    return cli_in_process


def nested_array(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [MAX_CONFIG_DEPTH + 1, 5_000])
def test_a_deeply_nested_config_is_a_config_error(cli: Cli, depth: int) -> None:
    (cli.workspace / "deep.toml").write_text(f"[executor]\nx = {nested_array(depth)}\n")
    done = cli("tools", "--config", "deep.toml")
    assert_one_line_error(done, 3, "deep.toml", f"nested more than {MAX_CONFIG_DEPTH} levels")


def test_a_config_at_the_depth_limit_is_read(cli: Cli) -> None:
    depth = MAX_CONFIG_DEPTH - 3  # the document, [tools] and [tools.read_file] are three
    (cli.workspace / "ok.toml").write_text(f"[tools.read_file]\nx = {nested_array(depth)}\n")
    done = cli("tools", "--config", "ok.toml")
    # read, then refused by the tool's own config model, not by the nesting limit
    assert "nested more than" not in done.stderr, done.stderr


def test_a_huge_config_is_refused_before_parsing(cli: Cli) -> None:
    (cli.workspace / "big.toml").write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    done = cli("tools", "--config", "big.toml")
    assert_one_line_error(done, 3, "big.toml", f"larger than {MAX_CONFIG_BYTES:,} bytes")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_a_deeply_nested_response_is_a_usage_error(cli: Cli, depth: int) -> None:
    (cli.workspace / "deep.json").write_text(nested_array(depth))
    done = cli("exec", "deep.json")
    assert_one_line_error(done, 2, "deep.json", "nested too deeply", f"over {MAX_DEPTH} levels")
    done = cli("exec", "-", stdin=nested_array(depth))
    assert_one_line_error(done, 2, "stdin", "nested too deeply")


def test_deeply_nested_arguments_are_the_models_error(cli: Cli) -> None:
    arguments = json.dumps({"path": "x"})[:-1] + ', "y": ' + nested_array(100_000) + "}"
    done = cli("call", "read_file", "-", stdin=arguments)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "nested too deeply" in done.stderr


def test_too_much_input_is_refused(cli: Cli) -> None:
    done = cli("call", "read_file", "-", stdin=b" " * (MAX_INPUT_BYTES + 1))
    assert_one_line_error(done, 2, "stdin", "larger than 64 MiB")


@pytest.mark.parametrize("text", [nested_array(100_000), '{"a": ' + "9" * 5_000 + "}"])
def test_an_mcp_config_nested_too_deeply_is_a_clear_error(cli: Cli, text: str) -> None:
    (cli.workspace / "mcp.json").write_text('{"mcpServers": ' + text + "}")
    done = cli("mcp", "servers", "mcp.json")
    assert done.returncode == 2 and done.stdout == ""
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert "mcp.json" in done.stderr
