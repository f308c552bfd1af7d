"""`import toolbridge` loads nothing but the package: every public name loads on first
use (the command line's --version and --help do not pay for the executor), and each
name is what it was when they were all imported up front."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_import_toolbridge_loads_no_submodule() -> None:
    run(
        "import sys, toolbridge\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('toolbridge.'))\n"
        "assert loaded == [], loaded\n"
        "assert 'pydantic' not in sys.modules\n"
    )


def test_every_public_name_resolves_to_its_module_object() -> None:
    run(
        "import importlib, toolbridge\n"
        "for name in toolbridge.__all__:\n"
        "    value = getattr(toolbridge, name)\n"
        "    if name != '__version__':\n"
        "        home = importlib.import_module(toolbridge._LAZY[name])\n"
        "        assert value is getattr(home, name), name\n"
        "assert set(toolbridge.__all__) <= set(dir(toolbridge))\n"
        "from toolbridge import *  # noqa\n"
    )


def test_tool_stays_the_decorator_after_its_namesake_module_loads() -> None:
    # The old module path toolbridge.tool (now toolbridge.core.tool) sets the package's
    # attribute `tool` when it loads.
    run(
        "import sys, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import toolbridge.tool\n"
        "from toolbridge import tool, ToolContext\n"
        "from toolbridge.core.function_tool import tool as decorator\n"
        "assert tool is decorator and callable(tool)\n"
        "import toolbridge\n"
        "assert toolbridge.tool is decorator\n"
        "assert ToolContext is sys.modules['toolbridge.core.tool'].ToolContext\n"
    )
