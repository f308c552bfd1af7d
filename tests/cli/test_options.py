"""What every command shares: --version, python -m toolbridge, help text, --scope, --format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.conftest import EXAMPLES, Cli, assert_one_line_error

from toolbridge import ToolContext, ToolLoader, __version__
from toolbridge.formats import PROVIDER_FORMATS, provider_format


@pytest.fixture
def cli(cli_in_process: Cli) -> Cli:
    """These tests check what a command prints and its exit code: run in this process
    (tests/cli/in_process.py), the same command gives the same output for less CPU."""
    return cli_in_process


EXAMPLE = (EXAMPLES / "anthropic_response.json").read_text()


def test_version(cli: Cli) -> None:
    done = cli("--version")
    assert (done.returncode, done.stdout) == (0, f"toolbridge {__version__}\n")


def test_python_dash_m_toolbridge_and_toolbridge_cli_are_the_same_command(workspace: Path) -> None:
    for module in ("toolbridge", "toolbridge.cli"):
        done = subprocess.run(
            [sys.executable, "-m", module, "--version"],
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.stdout == f"toolbridge {__version__}\n", done.stderr


def test_help_shows_flags_without_placeholders_and_the_formats(cli: Cli) -> None:
    for command in ("tools", "call", "exec"):
        done = cli(command, "--help")
        assert done.returncode == 0, done.stderr
        assert "<bool>" not in done.stdout
        for option in ("--workspace", "--config", "--scope", "--verbose"):
            assert option in done.stdout, (command, option)
    for command in ("tools", "exec"):
        assert "<" + "|".join(PROVIDER_FORMATS) + ">" in cli(command, "--help").stdout
    root = cli("--help")
    assert "Exit codes: 0 success, 1 a tool call failed" in " ".join(root.stdout.split())


def test_unknown_scope_is_an_error_listing_the_known_ones(cli: Cli) -> None:
    for command in (["tools"], ["call", "read_file", "{}"], ["exec", "-"]):
        done = cli(*command, "--scope", "nope", stdin=EXAMPLE)
        assert_one_line_error(done, 2, "unknown scope 'nope'; known scopes: default")


def test_tools_format_renders_every_provider(cli: Cli) -> None:
    registry = ToolLoader().registry(ToolContext(workspace=cli.workspace))
    for name in PROVIDER_FORMATS:
        done = cli("tools", "--format", name)
        assert done.returncode == 0, (name, done.stderr)
        assert json.loads(done.stdout) == provider_format(name).definitions(registry), name


def test_tools_table_lists_each_tool(cli: Cli) -> None:
    done = cli("tools")
    assert done.returncode == 0, done.stderr
    assert "read_file" in done.stdout and "definitions hash:" in done.stdout
