"""edit_file and list_dir through `ToolRegistry.execute`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from toolbridge import ErrorKind, ToolRegistry

SOURCE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


async def test_edit_replaces_exactly_once(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await registry.execute(
        "edit_file",
        {"path": "m.py", "old_string": "return a - b", "new_string": "return a - b - 0"},
    )
    assert result.text == "Replaced 1 occurrence in m.py (first at line 6)."
    assert (workspace / "m.py").read_text() == SOURCE.replace("a - b", "a - b - 0")


async def test_edit_refuses_ambiguous_matches_unless_replace_all(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "m.py").write_text(SOURCE)
    args = {"path": "m.py", "old_string": "(a, b)", "new_string": "(x, y)"}
    ambiguous = await registry.execute("edit_file", args)
    assert ambiguous.is_error
    assert "occurs 2 times in m.py (at lines 1, 5)" in ambiguous.text
    assert "replace_all" in ambiguous.text
    assert (workspace / "m.py").read_text() == SOURCE
    done = await registry.execute("edit_file", {**args, "replace_all": "true"})
    assert done.text == "Replaced 2 occurrences in m.py (first at line 1)."
    assert (workspace / "m.py").read_text().count("(x, y)") == 2


async def test_edit_no_match_shows_the_closest_lines(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await registry.execute(
        "edit_file",
        {"path": "m.py", "old_string": "def sub(a, c):\n    return a - c", "new_string": "x"},
    )
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "old_string was not found in m.py. The closest text:" in result.text
    assert "lines 5-6 (" in result.text
    assert "     5\tdef sub(a, b):\n     6\t    return a - b" in result.text
    assert "Copy the text exactly as shown" in result.text


async def test_edit_no_match_notes_whitespace_only_differences(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await registry.execute(
        "edit_file", {"path": "m.py", "old_string": "\treturn a + b", "new_string": "x"}
    )
    assert "line 2 (100% similar; differs only in indentation or spacing)" in result.text


async def test_edit_no_match_and_nothing_similar(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    result = await registry.execute(
        "edit_file", {"path": "m.py", "old_string": "zzzz qqqq", "new_string": "x"}
    )
    assert "no similar text was found either" in result.text


async def test_edit_keeps_crlf_and_bom(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result = await registry.execute(
        "edit_file", {"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"}
    )
    assert not result.is_error, result.text
    assert (workspace / "w.txt").read_bytes() == b"\xef\xbb\xbf1\r\n2\r\nthree\r\n"


async def test_edit_errors(registry: ToolRegistry, workspace: Path, outside: Path) -> None:
    (workspace / "m.py").write_text(SOURCE)
    (workspace / "b.bin").write_bytes(b"ab\x00cd")
    (workspace / "escape").symlink_to(outside / "secret.txt")
    same = await registry.execute(
        "edit_file", {"path": "m.py", "old_string": "a", "new_string": "a"}
    )
    assert "identical" in same.text
    binary = await registry.execute(
        "edit_file", {"path": "b.bin", "old_string": "ab", "new_string": "x"}
    )
    assert "binary" in binary.text
    escape = await registry.execute(
        "edit_file", {"path": "escape", "old_string": "OUTSIDE", "new_string": "pwned"}
    )
    assert escape.error_kind is ErrorKind.WORKSPACE_VIOLATION
    assert (outside / "secret.txt").read_text() == "OUTSIDE-SECRET\n"
    empty = await registry.execute(
        "edit_file", {"path": "m.py", "old_string": "", "new_string": "x"}
    )
    assert empty.error_kind is ErrorKind.INVALID_ARGUMENTS


def _tree(workspace: Path) -> None:
    (workspace / "src" / "pkg" / "deep").mkdir(parents=True)
    (workspace / "src" / "pkg" / "__init__.py").write_text("")
    (workspace / "src" / "pkg" / "deep" / "x.py").write_text("x = 1\n")
    (workspace / "README.md").write_text("# hi\n")
    (workspace / ".git" / "objects").mkdir(parents=True)


async def test_list_dir_top_level(registry: ToolRegistry, workspace: Path, outside: Path) -> None:
    _tree(workspace)
    (workspace / "escape").symlink_to(outside)
    result = await registry.execute("list_dir", {})
    assert result.text.splitlines() == [
        ".git/  (not entered)",
        "README.md  (5 B)",
        "escape  (symlink, not followed)",
        "src/",
    ]


async def test_list_dir_recursive_with_depth_and_caps(
    registry: ToolRegistry, workspace: Path
) -> None:
    _tree(workspace)
    result = await registry.execute("list_dir", {"path": "src", "recursive": True, "max_depth": 2})
    assert result.text.splitlines() == ["src/pkg/", "src/pkg/__init__.py  (0 B)", "src/pkg/deep/"]
    capped = await registry.execute("list_dir", {"recursive": "true", "max_entries": "2"})
    assert capped.text.splitlines() == [
        ".git/  (not entered)",
        "README.md  (5 B)",
        "… stopped at 2 of 6 entries; list a subdirectory, or raise max_entries (at most 5000)",
    ]


async def test_list_dir_ends_on_symlink_loops(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "a").mkdir()
    (workspace / "a" / "again").symlink_to(workspace / "a")
    (workspace / "a" / "up").symlink_to("..")
    result = await registry.execute("list_dir", {"recursive": True, "max_depth": 20})
    assert result.text.splitlines() == [
        "a/",
        "a/again  (symlink, not followed)",
        "a/up  (symlink, not followed)",
    ]


async def test_list_dir_errors(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "f.txt").write_text("x")
    (workspace / "empty").mkdir()
    assert (
        "f.txt is a file, not a directory"
        in (await registry.execute("list_dir", {"path": "f.txt"})).text
    )
    assert "nope does not exist" in (await registry.execute("list_dir", {"path": "nope"})).text
    assert (await registry.execute("list_dir", {"path": "empty"})).text == "(empty is empty)"
    outside = await registry.execute("list_dir", {"path": ".."})
    assert outside.error_kind is ErrorKind.WORKSPACE_VIOLATION
    bad = await registry.execute("list_dir", {"max_depth": 0})
    assert bad.error_kind is ErrorKind.INVALID_ARGUMENTS


# Run in a child process: drop every capability of this (single-threaded) process with
# capset(2), so that file permission bits bind even for root, check that the locked
# directory really cannot be opened, then list the workspace with the real tools.
_UNPRIVILEGED_LISTING = textwrap.dedent(
    """
    import asyncio, ctypes, json, os, sys

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inherit")]

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:
        sys.exit(f"capset failed: {os.strerror(ctypes.get_errno())}")
    root = sys.argv[1]
    try:
        os.close(os.open(os.path.join(root, "locked"), os.O_RDONLY | os.O_DIRECTORY))
    except PermissionError:
        pass
    else:
        sys.exit("setup failed: the locked directory can still be opened without capabilities")

    from toolbridge.security.workspace import Workspace
    from toolbridge.tools.files import ListDirTool
    from toolbridge.tools.search import GlobTool, GrepTool, SearchConfig

    guard = Workspace(root)
    # The Python engine: ripgrep, a new program run as uid 0, would get its
    # capabilities back at exec and read the locked directory.
    python = SearchConfig(engine="python")
    print(json.dumps({
        "list_dir": asyncio.run(ListDirTool(guard).execute(recursive=True)),
        "glob": asyncio.run(GlobTool(guard, python).execute(pattern="**/*.txt")),
        "grep": asyncio.run(GrepTool(guard, python).execute(pattern="text")),
    }))
    """
)


def test_list_dir_reports_unreadable_directories(workspace: Path) -> None:
    """A subdirectory the walk cannot open is reported as unreadable, not shown as empty.

    Tests run as root here, and root's CAP_DAC_OVERRIDE ignores `chmod 000`. So the
    listing runs in a child process that first drops all its capabilities with
    capset(2): uid 0 then gets the owner bits like any user, and opening the
    directory fails with a real EACCES (the child checks that it does).
    """
    (workspace / "a.txt").write_text("text\n")
    (workspace / "locked").mkdir()
    (workspace / "locked" / "hidden.txt").write_text("text\n")
    (workspace / "open").mkdir()
    (workspace / "open" / "inner.txt").write_text("text\n")
    (workspace / "locked").chmod(0)
    try:
        child = subprocess.run(
            [sys.executable, "-c", _UNPRIVILEGED_LISTING, str(workspace)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    finally:
        (workspace / "locked").chmod(0o755)
    assert child.returncode == 0, child.stderr
    results = json.loads(child.stdout)
    assert results["list_dir"].splitlines() == [
        "a.txt  (5 B)",
        "locked/  (unreadable: permission denied)",
        "open/",
        "open/inner.txt  (5 B)",
    ]
    # the searches go on past it too
    assert results["glob"].splitlines() == ["a.txt", "open/inner.txt"]
    assert results["grep"].splitlines() == ["a.txt:1: text", "open/inner.txt:1: text"]
