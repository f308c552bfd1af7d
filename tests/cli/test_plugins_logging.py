"""Broken plugins and failing tools: reported once, in one line; tracebacks only on request."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.cli.conftest import Cli

BOOM = """
    from toolbridge import tool

    @tool
    def boom() -> str:
        \"\"\"Always fails.\"\"\"
        raise RuntimeError("kaboom-detail")
"""


def test_a_broken_plugin_is_reported_once_in_one_line(cli: Cli) -> None:
    cli.plugin("broken_plugin", "import does_not_exist_anywhere\n", {"broken": "broken_plugin"})
    done = cli("tools", "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("skipped entry point 'broken' (broken_plugin): import failed")
    assert "does_not_exist_anywhere" in lines[0]
    assert "Traceback" not in done.stderr


def test_mcp_serve_reports_a_broken_plugin_once_in_one_line(cli: Cli) -> None:
    """`mcp serve` shows the warnings of the servers and of the MCP SDK: it showed the
    loader's record too, with its traceback, besides its own 'skipped' line."""
    cli.plugin("broken_plugin", "import does_not_exist_anywhere\n", {"broken": "broken_plugin"})
    done = cli("mcp", "serve", stdin="")  # stdin ends at once: the stdio server ends
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("skipped entry point 'broken' (broken_plugin): import failed")


def test_verbose_shows_the_broken_plugins_traceback_once(cli: Cli) -> None:
    cli.plugin("broken_plugin", "import does_not_exist_anywhere\n", {"broken": "broken_plugin"})
    done = cli("tools", "--json", "-v")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Traceback") == 1
    assert done.stderr.count("does_not_exist_anywhere") >= 1
    assert done.stderr.count("skipping entry point 'broken'") == 1
    assert "skipped entry point" not in done.stderr  # not a second report


def test_a_failing_tool_prints_no_traceback_unless_verbose(cli: Cli) -> None:
    cli.plugin("boom_plugin", BOOM, {"boom": "boom_plugin:boom"})
    done = cli("call", "boom")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("Error: tool 'boom' failed: RuntimeError: kaboom-detail")
    verbose = cli("call", "boom", "-v")
    assert verbose.returncode == 1
    assert "Traceback" in verbose.stderr and "DEBUG toolbridge.core.registry" in verbose.stderr


def test_the_library_prints_nothing_when_logging_is_not_configured(tmp_path: Path) -> None:
    """A failing tool's traceback goes to the library logger at DEBUG, and nowhere else."""
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, logging
            from toolbridge import ToolCallRequest, ToolExecutor, ToolRegistry, tool

            @tool
            def boom() -> str:
                \"\"\"Always fails.\"\"\"
                raise RuntimeError("kaboom")

            registry = ToolRegistry([boom])
            (outcome,) = asyncio.run(ToolExecutor(registry).run([ToolCallRequest("1", "boom", {})]))
            print(outcome.result.text.splitlines()[0])

            records = []
            class Keep(logging.Handler):
                def emit(self, record):
                    records.append(record)
            logging.getLogger("toolbridge").addHandler(Keep(level=logging.DEBUG))
            logging.getLogger("toolbridge").setLevel(logging.DEBUG)
            asyncio.run(ToolExecutor(registry).run([ToolCallRequest("2", "boom", {})]))
            (record,) = [r for r in records if r.exc_info]
            print(record.levelname, record.name, type(record.exc_info[1]).__name__)
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "Error: tool 'boom' failed: RuntimeError: kaboom",
        "DEBUG toolbridge.core.registry RuntimeError",
    ]


ODD = """
    from toolbridge import Tool

    class Odd(Tool):
        name = "odd"
        description = 42  # not a string: the tools table cannot show it

        async def execute(self) -> str:
            return "odd"
"""


def test_an_unexpected_error_is_one_line_exit_4_and_a_traceback_with_v(cli: Cli) -> None:
    cli.plugin("odd_plugin", ODD, {"odd": "odd_plugin:Odd"})
    done = cli("tools")
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: internal error: ") and line.endswith("-v for the traceback)")
    verbose = cli("tools", "-v")
    assert verbose.returncode == 4
    assert "Traceback" in verbose.stderr
