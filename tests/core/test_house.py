"""The package's shape: stage folders, no import circle, no upward import, old paths kept.

Read from the source with `ast` (nothing is imported), so a new module that breaks a
rule fails here with the modules named, not in a drawing someone has to remember to make.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolbridge

PACKAGE = Path(toolbridge.__file__).parent
SHARED_TOP_LEVEL = {"__init__", "__main__", "version"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _by_name(call: ast.Call) -> ast.expr | None:
    """The module-name argument of an import by name (``importlib.import_module(x)``,
    ``import_module(x)``, ``__import__(x)``), or None for any other call."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called in ("import_module", "__import__") and call.args:
        return call.args[0]
    return None


def _imports(name: str) -> Iterator[tuple[str, str]]:
    """(imported toolbridge module, where: "module", "function", "typing" or "by name") of
    `name`. An import by name of a constant string names its module; one of a computed
    name may import any toolbridge module whose name the module holds as a string (the
    loader's package, the face's table of lazy names)."""
    path = MODULES[name]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    strings = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    computed = False

    def walk(node: ast.AST, where: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for inner in child.body:
                    yield from walk(ast.Module([inner], []), "typing")
                for inner in child.orelse:
                    yield from walk(ast.Module([inner], []), where)
            elif isinstance(child, ast.Import):
                yield from ((alias.name, where) for alias in child.names)
            elif isinstance(child, ast.Call) and (target := _by_name(child)) is not None:
                if isinstance(target, ast.Constant) and isinstance(target.value, str):
                    yield target.value, "by name"
                else:
                    nonlocal computed
                    computed = True
                yield from walk(child, where)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = name.split(".") if is_package else name.split(".")[:-1]
                    package = package[: len(package) - child.level + 1]
                    base = ".".join([*package, base] if base else package)
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    yield (full if full in MODULES else base), where
            else:
                inner_where = (
                    "function"
                    if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                    else where
                )
                yield from walk(child, inner_where)

    found = list(walk(tree, "module"))
    if computed:
        # (a dotted name: "toolbridge" alone is also the program's name)
        found += [(text, "by name") for text in sorted(strings) if "." in text and text in MODULES]
    for target, where in found:
        if target.split(".")[0] == "toolbridge" and target != name:
            yield target, where


GRAPH = {name: sorted(set(_imports(name))) for name in MODULES}
# Imports by name that are the design: the loader scans the built-in tools' package, and
# the command line's root loads a command's module on its first use (the module then
# registers its commands on the root's `app`, which it imports).
BY_DESIGN = {("toolbridge.core.loader", "toolbridge.tools")} | {
    ("toolbridge.cli.app", target)
    for target, where in GRAPH["toolbridge.cli.app"]
    if where == "by name" and target.startswith("toolbridge.cli.")
}


def test_the_top_level_holds_only_the_face_main_and_what_every_stage_shares() -> None:
    top_level = {path.stem for path in PACKAGE.glob("*.py")}
    assert top_level == SHARED_TOP_LEVEL, "put a new module in the folder of its stage"


def test_no_import_circle_even_through_lazy_or_type_checking_imports() -> None:
    edges = {
        name: {
            target for target, _ in deps if target in MODULES and (name, target) not in BY_DESIGN
        }
        for name, deps in GRAPH.items()
    }
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                circle = [*path[path.index(target) :], target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name)


def test_subpackages_import_the_modules_they_use_never_the_package_face() -> None:
    face = [name for name, deps in GRAPH.items() for target, _ in deps if target == "toolbridge"]
    assert face == []


def test_core_imports_no_later_stage() -> None:
    upward = [
        (name, target)
        for name, deps in GRAPH.items()
        if name.startswith("toolbridge.core")
        for target, _ in deps
        if not target.startswith("toolbridge.core")
        and target != "toolbridge.version"
        and (name, target) not in BY_DESIGN
    ]
    assert upward == []


def test_execution_imports_none_of_the_stages_built_on_it() -> None:
    # the executor runs prepared calls: provider wires, the agent loop, MCP, skills and the
    # command line use it, never the other way round
    later = ("agent", "cli", "formats", "mcp", "skills")
    upward = [
        (name, target)
        for name, deps in GRAPH.items()
        if name.startswith("toolbridge.execution")
        for target, _ in deps
        if target.partition(".")[2].split(".")[0] in later
    ]
    assert upward == []


def test_the_rules_see_an_import_of_each_kind() -> None:
    # the walk finds module-level, lazy, type-checking and by-name imports (else the rules
    # prove nothing): importlib.import_module("toolbridge.x") was not seen
    kinds = {where for deps in GRAPH.values() for _, where in deps}
    assert kinds == {"module", "function", "typing", "by name"}
    assert ("toolbridge.core.tool", "module") in GRAPH["toolbridge.core.registry"]
    assert ("toolbridge.tools", "by name") in GRAPH["toolbridge.core.loader"]
    assert ("toolbridge.cli.mcp", "by name") in GRAPH["toolbridge.cli.app"]


def test_an_import_by_name_of_a_constant_string_is_seen(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\n"
        "def f():\n"
        "    importlib.import_module('toolbridge.cli.app')\n"
        "    __import__('toolbridge.agent.runner')\n"
    )
    MODULES["toolbridge.core.probe"] = probe
    try:
        seen = set(_imports("toolbridge.core.probe"))
    finally:
        del MODULES["toolbridge.core.probe"]
    assert seen == {("toolbridge.cli.app", "by name"), ("toolbridge.agent.runner", "by name")}


@pytest.mark.parametrize("old", sorted(toolbridge._MOVED))
def test_an_old_module_path_imports_the_moved_module_with_a_warning(old: str) -> None:
    new = toolbridge._MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        moved = importlib.import_module(old)
    try:
        module = importlib.import_module(new)
        if old in toolbridge._SPLIT:  # a module of its own, reading each name where it lives
            assert all(getattr(moved, name) is getattr(module, name) for name in module.__all__)
        else:
            assert moved is module
            assert moved.__spec__ is not None and moved.__spec__.name == new  # its own spec
        assert toolbridge.tool is importlib.import_module("toolbridge.core.function_tool").tool
    finally:
        sys.modules.pop(old, None)


def test_a_user_program_on_old_paths_still_runs() -> None:
    # as an upgrading user's code does it: old deep imports, in a fresh interpreter
    program = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        "warnings.filterwarnings('default', category=DeprecationWarning)\n"
        "from toolbridge.executor import ToolExecutor\n"
        "from toolbridge.calls import ToolCallRequest\n"
        "from toolbridge.tool import Tool\n"
        "from toolbridge.results import ResultStore\n"
        "import toolbridge\n"
        "assert ToolExecutor is toolbridge.ToolExecutor and Tool is toolbridge.Tool\n"
        "assert ResultStore is toolbridge.ResultStore and callable(toolbridge.tool)\n"
        "assert ToolCallRequest is toolbridge.ToolCallRequest\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("DeprecationWarning") == 4
    assert "toolbridge.executor moved to toolbridge.execution.executor" in done.stderr
