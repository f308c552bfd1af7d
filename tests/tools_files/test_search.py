"""glob and grep through `ToolRegistry.execute` on both engines (ripgrep and Python),
the glob matcher, and the grep deadline."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from toolbridge import (
    ErrorKind,
    ToolConfigError,
    ToolContext,
    ToolExecutionError,
    ToolLoader,
    ToolRegistry,
)
from toolbridge.search.globs import expand_braces, glob_match, pattern_parts
from toolbridge.search.matching import GrepRequest, ripgrep_matches
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import ListDirTool
from toolbridge.tools.search import GlobTool, GrepTool, SearchConfig

ENGINES = ["ripgrep", "python"]


def test_ripgrep_is_installed_here() -> None:
    """The ripgrep engine is tested for real: CI installs ripgrep (.ci/run)."""
    assert shutil.which("rg") is not None


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def registry(workspace: Path, engine: str) -> ToolRegistry:
    """glob and grep over `workspace`, on the engine of the test's parameter."""
    guard, config = Workspace(workspace), SearchConfig(engine=engine)  # type: ignore[arg-type]
    glob, grep = GlobTool(guard, config), GrepTool(guard, config)
    assert glob.engine == grep.engine == engine
    tools = [glob, grep, ListDirTool(guard)]
    return ToolRegistry(tools, context=ToolContext(workspace=workspace))


def _tree(workspace: Path, outside: Path) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "pkg" / "core.py").write_text("import os\nTOKEN = 'needle'\n")
    (workspace / "src" / "app.py").write_text("def main():\n    return 'Needle'\n")
    (workspace / "README.md").write_text("a needle in a haystack\n")
    (workspace / "data.bin").write_bytes(b"needle\x00\x01")
    (workspace / "node_modules" / "lib").mkdir(parents=True)
    (workspace / "node_modules" / "lib" / "x.py").write_text("needle\n")
    (outside / "leak.py").write_text("needle OUTSIDE-SECRET\n")
    (workspace / "escape").symlink_to(outside)
    (workspace / "escape.py").symlink_to(outside / "leak.py")


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.py", "a/b/c.py", True),
        ("**/*.py", "c.py", True),
        ("*.py", "a/c.py", False),
        ("src/**", "src/a/b", True),
        ("src/*/x", "src/a/b/x", False),
        ("a/**/b/**/c", "a/x/b/y/z/c", True),
        ("[ab]?.txt", "b1.txt", True),
    ],
)
def test_glob_match(pattern: str, path: str, expected: bool) -> None:
    assert glob_match(pattern_parts(pattern), tuple(path.split("/"))) is expected


def test_glob_match_stays_polynomial_on_hostile_patterns() -> None:
    parts = pattern_parts("/".join(["**"] * 3 + ["*a*a*a*a*a*a*a*a*a*a*b"] * 3))
    assert glob_match(parts, tuple(["a" * 60] * 30)) is False


def test_braces_expand_to_alternatives() -> None:
    assert expand_braces("src/*.{ts,tsx}") == ["src/*.ts", "src/*.tsx"]
    assert expand_braces("{a,b}/{c,d}") == ["a/c", "a/d", "b/c", "b/d"]
    with pytest.raises(ToolExecutionError, match="more than 64 alternatives"):
        expand_braces("{a,b}" * 7)


def test_bad_glob_patterns() -> None:
    for pattern, message in (("/etc/*", "absolute"), ("../*", "'..'"), ("./", "matches nothing")):
        with pytest.raises(ToolExecutionError, match=message):
            pattern_parts(pattern)


async def test_glob_finds_paths_without_following_symlinks(
    registry: ToolRegistry, workspace: Path, outside: Path
) -> None:
    _tree(workspace, outside)
    result = await registry.execute("glob", {"pattern": "**/*.py"})
    assert result.text.splitlines() == ["src/app.py", "src/pkg/core.py"]
    top = await registry.execute("glob", {"pattern": "*", "max_results": "1"})
    assert top.text.splitlines() == [
        "README.md",
        "… stopped at 1 matches; narrow the pattern or path",
    ]
    files = await registry.execute("glob", {"pattern": "src/*", "path": "."})
    assert files.text.splitlines() == ["src/app.py"]
    either = await registry.execute("glob", {"pattern": "**/*.{md,bin}"})
    assert either.text.splitlines() == ["README.md", "data.bin"]
    none = await registry.execute("glob", {"pattern": "*.rs", "path": "src"})
    assert none.text == "No paths match '*.rs' under src."
    missing = await registry.execute("glob", {"pattern": "nope/**/*.py", "path": "src"})
    assert missing.text == "No paths match 'nope/**/*.py' under src."


async def test_absolute_glob_patterns_are_checked_by_the_guard(
    registry: ToolRegistry, workspace: Path, outside: Path
) -> None:
    """Inside the workspace an absolute pattern works; outside it is a workspace
    violation (not a generic error), whatever the spelling."""
    _tree(workspace, outside)
    inside = await registry.execute("glob", {"pattern": f"{workspace}/src/**/*.py"})
    assert inside.text.splitlines() == ["src/app.py", "src/pkg/core.py"]
    for pattern in ("/etc/*", f"{outside}/*.txt", f"{workspace}/../outside/*", "/**/*.py"):
        result = await registry.execute("glob", {"pattern": pattern})
        assert result.error_kind is ErrorKind.WORKSPACE_VIOLATION, pattern
        assert "OUTSIDE-SECRET" not in result.text and "leak" not in result.text
    dotdot = await registry.execute("glob", {"pattern": f"{workspace}/src/*/../*.py"})
    assert dotdot.error_kind is ErrorKind.EXECUTION_ERROR and "'..'" in dotdot.text


async def test_glob_errors(registry: ToolRegistry, workspace: Path) -> None:
    escape = await registry.execute("glob", {"pattern": "*", "path": "../.."})
    assert escape.error_kind is ErrorKind.WORKSPACE_VIOLATION


async def test_grep_finds_lines_and_skips_what_it_should(
    registry: ToolRegistry, workspace: Path, outside: Path
) -> None:
    _tree(workspace, outside)
    result = await registry.execute("grep", {"pattern": "needle"})
    assert result.text.splitlines() == [
        "README.md:1: a needle in a haystack",
        "src/pkg/core.py:2: TOKEN = 'needle'",
    ]
    assert "OUTSIDE" not in result.text


async def test_grep_options(registry: ToolRegistry, workspace: Path, outside: Path) -> None:
    _tree(workspace, outside)
    folded = await registry.execute(
        "grep", {"pattern": "needle", "include": "*.py", "ignore_case": "true"}
    )
    assert folded.text.splitlines() == [
        "src/app.py:2:     return 'Needle'",
        "src/pkg/core.py:2: TOKEN = 'needle'",
    ]
    by_path = await registry.execute("grep", {"pattern": "^import", "include": "src/pkg/*.py"})
    assert by_path.text == "src/pkg/core.py:1: import os"
    one_file = await registry.execute("grep", {"pattern": "main", "path": "src/app.py"})
    assert one_file.text == "src/app.py:1: def main():"
    capped = await registry.execute("grep", {"pattern": ".", "path": "src", "max_results": 1})
    assert capped.text.splitlines() == [
        "src/app.py:1: def main():",
        "… stopped at 1 matches; narrow the pattern, path or include",
    ]
    none = await registry.execute("grep", {"pattern": "absent", "path": "src"})
    assert none.text == "No matches for 'absent' in src (2 files searched)."


async def test_grep_cuts_long_lines_around_the_match(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "min.js").write_text("x" * 5000 + "FOUND" + "y" * 5000 + "\n")
    result = await registry.execute("grep", {"pattern": "FOUND"})
    assert "FOUND" in result.text
    assert result.text.startswith("min.js:1: …x")
    assert len(result.text) < 400


async def test_grep_errors(registry: ToolRegistry, workspace: Path) -> None:
    invalid = await registry.execute("grep", {"pattern": "(unclosed"})
    assert invalid.is_error and "not a valid regular expression" in invalid.text
    assert "escape special characters" in invalid.text
    escape = await registry.execute("grep", {"pattern": "x", "path": "/etc"})
    assert escape.error_kind is ErrorKind.WORKSPACE_VIOLATION
    missing = await registry.execute("grep", {"pattern": "x", "path": "nope"})
    assert "nope does not exist" in missing.text


async def test_directory_arguments_are_checked_alike(
    registry: ToolRegistry, workspace: Path
) -> None:
    """list_dir, glob and grep share one check (and one wording) for a `path` directory."""
    (workspace / "f.txt").write_text("x\n")
    os.mkfifo(workspace / "pipe")
    calls = [("list_dir", {}), ("glob", {"pattern": "*"}), ("grep", {"pattern": "x"})]
    for name, arguments in calls:
        missing = await registry.execute(name, {**arguments, "path": "nope"})
        assert missing.text.startswith("Error: nope does not exist"), name
        pipe = await registry.execute(name, {**arguments, "path": "pipe"})
        assert pipe.text.startswith("Error: pipe is not a directory"), name
        assert pipe.error_kind is ErrorKind.INVALID_ARGUMENTS, name
    for name, arguments in calls[:2]:  # grep searches a single file instead
        file = await registry.execute(name, {**arguments, "path": "f.txt"})
        assert file.text.startswith("Error: f.txt is a file, not a directory"), name
        assert "read_file" in file.text


async def test_grep_drops_a_utf8_bom(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "bom.txt").write_bytes(b"\xef\xbb\xbfneedle\n")
    result = await registry.execute("grep", {"pattern": "^needle"})
    assert result.text == "bom.txt:1: needle"


def _grep_workers() -> list[int]:
    """Live grep worker processes started by this test process."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid"))
        if b"grep_worker.py" in cmdline and int(parent) == os.getpid():
            found.append(int(pid))
    return found


PYTHON = SearchConfig(engine="python")


async def test_a_catastrophic_pattern_is_stopped_and_its_worker_killed(workspace: Path) -> None:
    (workspace / "evil.txt").write_text(("a" * 40 + "!\n") * 3)
    tool = GrepTool(Workspace(workspace), PYTHON)
    tool.deadline = 0.5
    with pytest.raises(ToolExecutionError) as caught:
        await tool.execute(pattern="(a+)+$")
    assert "did not finish within 0.5 s" in caught.value.message
    assert "nested quantifiers" in caught.value.hint
    assert _grep_workers() == []


async def test_results_found_before_the_deadline_are_kept(workspace: Path) -> None:
    (workspace / "a.txt").write_text("needle here\n")
    (workspace / "b.txt").write_text("a" * 40 + "!\n")
    tool = GrepTool(Workspace(workspace), PYTHON)
    # generous for a busy machine: the worker must start and finish a.txt in this time,
    # and b.txt would take far longer than any deadline
    tool.deadline = 5.0
    text = await tool.execute(pattern="needle|(a+)+$")
    assert text.splitlines() == [
        "a.txt:1: needle here",
        "… the search was stopped at its 5 s limit after 1 of 2 files; results are incomplete",
    ]
    assert _grep_workers() == []


@pytest.mark.parametrize("engine", ENGINES)
async def test_the_grep_deadline_covers_the_walk(workspace: Path, engine: str) -> None:
    """The deadline starts before the walk for candidate files, not after it.

    With no time at all the walk stops at its first entry and nothing is read or
    searched; the error blames the size of the tree, not the pattern. (Before, the
    whole tree was walked first and only the worker ran under the deadline.)
    """
    for n in range(20):
        (workspace / f"d{n:02}").mkdir()
        (workspace / f"d{n:02}" / "f.txt").write_text("needle\n")
    tool = GrepTool(Workspace(workspace), SearchConfig(engine=engine))  # type: ignore[arg-type]
    tool.deadline = 0
    with pytest.raises(ToolExecutionError) as caught:
        await tool.execute(pattern="needle")
    assert caught.value.message == (
        "the search for 'needle' was stopped at its 0 s limit while still listing the files "
        "under . (0 files listed); nothing was searched"
    )
    assert "narrow path" in caught.value.hint
    assert "nested quantifiers" not in caught.value.hint
    assert _grep_workers() == []


async def test_grep_matches_each_line_on_its_own(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "crlf.txt").write_bytes(b"foo\r\nbar foo\r\n")
    (workspace / "lf.txt").write_text("foo\nbar\n")
    ends = await registry.execute("grep", {"pattern": "foo$", "include": "crlf.txt"})
    assert ends.text.splitlines() == ["crlf.txt:1: foo", "crlf.txt:2: bar foo"]
    starts = await registry.execute("grep", {"pattern": r"\Abar", "include": "lf.txt"})
    assert starts.text == "lf.txt:2: bar"
    last = await registry.execute("grep", {"pattern": r"o(?![\s\S])", "include": "lf.txt"})
    assert last.text == "lf.txt:1: foo"
    # an inline group that turns MULTILINE off must not defeat the whole-text prefilter
    (workspace / "xy.txt").write_text("x\ny\n")
    inline = await registry.execute("grep", {"pattern": "(?-m:x$)", "include": "xy.txt"})
    assert inline.text == "xy.txt:1: x"


def test_the_engine_comes_from_the_search_config_section(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def built(config: dict[str, object]) -> dict[str, str]:
        context = ToolContext(workspace=workspace, config={"search": config})
        tools = ToolLoader().load(context)
        return {t.name: t.engine for t in tools if isinstance(t, GlobTool | GrepTool)}

    assert built({}) == {"glob": "ripgrep", "grep": "ripgrep"}
    assert built({"engine": "python"}) == {"glob": "python", "grep": "python"}
    assert built({"ripgrep_path": shutil.which("rg")}) == {"glob": "ripgrep", "grep": "ripgrep"}
    with pytest.raises(ToolConfigError, match="ripgrep was not found"):
        built({"ripgrep_path": "/nonexistent/rg"})
    with pytest.raises(ToolConfigError, match="engine"):
        built({"engine": "fast"})
    monkeypatch.setenv("PATH", str(workspace))  # no rg on PATH: auto falls back to Python
    assert built({}) == {"glob": "python", "grep": "python"}
    with pytest.raises(ToolConfigError, match="ripgrep was not found"):
        built({"engine": "ripgrep"})


async def test_ripgrep_results_through_a_symlink_are_dropped(
    workspace: Path, outside: Path
) -> None:
    """ripgrep opens listed files by name, so a file or directory swapped for a symlink
    after the listing would be followed; the matches are checked again and dropped."""
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "dir").symlink_to(outside)
    (workspace / "real.txt").write_text("OUTSIDE-SECRET is not here, but this line matches\n")
    rg = shutil.which("rg")
    assert rg is not None
    request = GrepRequest("OUTSIDE", False, 10, 300, 1 << 20)
    stop = time.monotonic() + 30
    files = ["dir/secret.txt", "link.txt", "real.txt"]  # as if listed before the swap
    found = await ripgrep_matches(rg, Workspace(workspace), files, request, stop)
    assert [path for path, _, _ in found.matches] == ["real.txt"]
