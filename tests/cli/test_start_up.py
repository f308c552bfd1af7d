"""The ``toolbridge`` console script at start-up: Ctrl-C at any moment of its imports
exits 130 without a traceback, and the quick answers load little.

The Ctrl-C tests run the console script itself, as a user starts it (next to this
Python), with ``-X importtime``: the interpreter writes a line as each import ends, so
the signal is sent when the process is provably in the middle of importing, among them
``toolbridge``'s own ``__init__``, which no code in the package can guard.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAIT = 30.0  # seconds before a process that never reacts counts as hung (a hang guard)
SCRIPT = Path(sys.executable).with_name("toolbridge")


def default_ctrl_c() -> None:
    """In the child: Ctrl-C as at a terminal (a test run in the background inherits it
    ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def imported(line: bytes) -> str:
    """The module an ``-X importtime`` line says was imported ('' for another line)."""
    if not line.startswith(b"import time:"):
        return ""
    return line.rsplit(b"|", 1)[-1].strip().decode()


# Each a module whose import ends while an outer one goes on: `importlib`, `logging`
# and `typing` inside ``toolbridge/__init__``, `toolbridge` inside ``toolbridge.cli``,
# `toolbridge.cli.display` inside the command line's application; then later ones, as
# the command's own modules load (`typer.main`, the application, the executor, the
# registry).
@pytest.mark.parametrize(
    "marker",
    [
        "importlib",
        "logging",
        "typing",
        "toolbridge",
        "toolbridge.cli.display",
        "typer.main",
        "toolbridge.cli.app",
        "toolbridge.execution.executor",
        "toolbridge.core.registry",
    ],
)
def test_ctrl_c_while_the_console_script_imports_exits_130_without_a_traceback(
    tmp_path: Path, marker: str
) -> None:
    # `mcp serve` on stdio with stdin kept open runs until Ctrl-C: however late the
    # signal comes on a busy machine, the command is still there to receive it.
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(SCRIPT), "mcp", "serve"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=default_ctrl_c,  # noqa: PLW1509  (no threads here)
    )
    assert process.stderr is not None
    seen = b""
    end = time.monotonic() + WAIT
    line = b""
    while time.monotonic() < end:
        line = process.stderr.readline()
        seen += line
        if not line or imported(line) == marker:
            break
    assert line, seen.decode(errors="replace")  # the marker came: the process runs on
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    try:
        code = process.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    finally:
        assert process.stdin is not None
        process.stdin.close()
    shown = rest.decode(errors="replace")
    assert code == 130, shown
    assert "Traceback" not in shown and "KeyboardInterrupt" not in shown, shown


# Runs the console script as its own ``#!`` line would, and writes the names in
# `sys.modules` when the process exits (``-X importtime`` misses what
# `importlib.import_module` loads, as the command line's lazy commands).
RECORD = """
import atexit, json, runpy, sys
script, record, *args = sys.argv[1:]
def write():
    with open(record, "w") as file:
        json.dump(sorted(sys.modules), file)
atexit.register(write)
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
"""


def modules_loaded(tmp_path: Path, *args: str) -> set[str]:
    """The modules the console script imports to answer `args`."""
    record = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", RECORD, str(SCRIPT), str(record), *args],
        capture_output=True,
        timeout=WAIT * 2,
        check=False,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
    )
    assert done.returncode in (0, 2), done.stderr.decode(errors="replace")
    loaded: list[str] = json.loads(record.read_text())
    return set(loaded)


HEAVY = {"typer", "rich", "pydantic", "httpx", "openai", "toolbridge.execution.executor"}


def test_version_loads_no_command_line_library(tmp_path: Path) -> None:
    loaded = modules_loaded(tmp_path, "--version")
    assert "toolbridge" in loaded  # the check sees the imports
    assert not loaded & (HEAVY | {"typer", "click"}), sorted(loaded & HEAVY)


def test_help_loads_neither_rich_nor_pydantic_nor_a_command(tmp_path: Path) -> None:
    loaded = modules_loaded(tmp_path, "--help")
    assert "typer" in loaded
    assert not loaded & (HEAVY - {"typer"}), sorted(loaded & HEAVY)
    assert not {
        m for m in loaded if m.startswith("toolbridge.cli.") and m != "toolbridge.cli.app"
    } - {"toolbridge.cli.display"}


def test_a_missing_key_is_found_before_the_sdk_and_the_agent_loop_load(tmp_path: Path) -> None:
    loaded = modules_loaded(tmp_path, "agent", "hi", "--workspace", str(tmp_path), "--no-skills")
    assert "toolbridge.cli.agent_command" in loaded
    assert not loaded & {"openai", "httpx", "toolbridge.agent", "toolbridge.cli.agent"}
