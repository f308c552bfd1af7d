"""--config FILE: [tools.<key>] passed through to the tools, [executor] sets the policy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.cli.conftest import EXAMPLES, Cli, assert_one_line_error


@pytest.fixture
def cli(cli_in_process: Cli) -> Cli:
    """These tests check what a command prints and its exit code: run in this process
    (tests/cli/in_process.py), the same command gives the same output for less CPU."""
    return cli_in_process


EXAMPLE = (EXAMPLES / "anthropic_response.json").read_text()

PLUGIN = """
    import asyncio, json
    from pydantic import BaseModel, ConfigDict
    from toolbridge import Tool, ToolContext, current_context

    class EchoConfig(BaseModel):
        model_config = ConfigDict(extra="forbid")
        greeting: str = "hello"
        times: int = 1

    class EchoConfigTool(Tool):
        name = "echo_config"
        description = "Say what the configuration says."
        config_key = "echo"

        def __init__(self, config: EchoConfig) -> None:
            self.config = config

        @classmethod
        def config_cls(cls):
            return EchoConfig

        @classmethod
        def create(cls, ctx: ToolContext) -> "EchoConfigTool":
            return cls(ctx.tool_config)

        async def execute(self) -> str:
            raw = current_context().config.get("echo")
            return json.dumps({"validated": self.config.model_dump(), "raw": raw})

    class SlowTool(Tool):
        name = "slow"
        description = "Sleeps for a long time."
        read_only = True

        async def execute(self) -> str:
            await asyncio.sleep(30)
            return "woke up"
"""


def _config(cli: Cli, text: str) -> str:
    path = cli.workspace / "toolbridge.toml"
    path.write_text(text)
    return str(path)


def test_tool_sections_reach_the_tool_unchanged(cli: Cli) -> None:
    cli.plugin("echo_plugin", PLUGIN, {"echo": "echo_plugin:EchoConfigTool"})
    config = _config(cli, '[tools.echo]\ngreeting = "hi"\ntimes = 3\n')
    done = cli("call", "echo_config", "--config", config)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "validated": {"greeting": "hi", "times": 3},
        "raw": {"greeting": "hi", "times": 3},
    }


def test_executor_section_sets_the_policy(cli: Cli) -> None:
    cli.plugin("echo_plugin", PLUGIN, {"slow": "echo_plugin:SlowTool"})
    config = _config(cli, "[executor]\ndefault_timeout = 0.2\n")
    done = cli("call", "slow", "--config", config, "--json")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["error_kind"] == "timeout"
    assert "time limit of 0.2 s" in result["content"]


def test_bad_config_files_are_one_line_with_exit_code_3(cli: Cli, tmp_path: Path) -> None:
    cli.plugin("echo_plugin", PLUGIN, {"echo": "echo_plugin:EchoConfigTool"})
    cases = {
        "[executor\n": "not valid TOML",
        "[nope]\n": "unknown section 'nope'; known sections: executor, tools",
        "[executor]\ntimeout = 3\n": "unknown [executor] key 'timeout'; known keys:",
        "[executor]\ndefault_timeout = 'soon'\n": "[executor] default_timeout cannot be 'soon'",
        "[executor]\ndefault_timeout = -1\n": "default_timeout must be > 0",
        "[executor]\napproval = 'never'\n": "approval must be one of 'flag', 'writes'",
        "[tools]\nexec = 1\n": "[tools.exec] must be a table",
        "[tools.exce]\n": "no tool reads [tools.exce]; sections tools read: echo, exec, ",
        "[tools.echo]\ntimes = 'many'\n": "configuration of tool 'echo_config' (section 'echo')",
        "[tools.echo]\ncolour = 'red'\n": "field 'colour'",
    }
    for text, expected in cases.items():
        done = cli("tools", "--config", _config(cli, text))
        assert_one_line_error(done, 3, "toolbridge.toml", expected)
    assert_one_line_error(cli("tools", "-c", "missing.toml"), 3, "'missing.toml' does not exist")
    assert_one_line_error(cli("tools", "-c", str(tmp_path)), 3, "cannot read config file")
    (cli.workspace / "latin1.toml").write_bytes(b"# caf\xe9\n")
    assert_one_line_error(cli("tools", "-c", "latin1.toml"), 3, "not UTF-8")


def test_every_loading_command_takes_the_config(cli: Cli) -> None:
    config = _config(cli, "[nope]\n")
    for command in (["tools"], ["call", "read_file", "{}"], ["exec", "-"]):
        done = cli(*command, "--config", config, stdin=EXAMPLE)
        assert_one_line_error(done, 3, "unknown section 'nope'")


def test_allow_unsandboxed_exec_runs_shell_commands(cli: Cli) -> None:
    done = cli("call", "exec", '{"command": "echo from-the-shell"}', "--allow-unsandboxed-exec")
    assert done.returncode == 0, done.stderr
    assert "from-the-shell" in done.stdout


def test_the_sample_config_of_the_guide_loads(cli: Cli) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "cli.md").read_text()
    (sample,) = re.findall(r"```toml\n(.*?)```", page, re.S)
    done = cli("tools", "--config", _config(cli, sample))
    assert done.returncode == 0, done.stderr
