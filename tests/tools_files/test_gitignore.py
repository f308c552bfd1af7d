""".gitignore in glob and grep: the Python rules, both engines on one tree, and parity."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from toolbridge import ToolRegistry
from toolbridge.search import matching
from toolbridge.search.gitignore import parse_gitignore, rebase_gitignore
from toolbridge.security.workspace import Workspace
from toolbridge.tools.search import GlobTool, GrepTool, SearchConfig


@pytest.mark.parametrize(
    ("rules", "path", "is_dir", "verdict"),
    [
        ("*.log", "a.log", False, True),
        ("*.log", "deep/er/a.log", False, True),
        ("*.log\n!keep.log", "x/keep.log", False, False),
        ("build/", "build", True, True),
        ("build/", "build", False, None),  # a file named build is not a directory
        ("/only_root.txt", "only_root.txt", False, True),
        ("/only_root.txt", "sub/only_root.txt", False, None),
        ("docs/*.tmp", "docs/a.tmp", False, True),
        ("docs/*.tmp", "x/docs/a.tmp", False, None),  # a middle slash anchors
        ("docs/*.tmp", "docs/deep/a.tmp", False, None),  # '*' stays in one name
        ("**/cache", "a/b/cache", True, True),
        ("logs/**", "logs/x/y.txt", False, True),
        ("a/**/z", "a/z", False, True),
        ("a/**/z", "a/b/c/z", False, True),
        ("file[0-9].txt", "file7.txt", False, True),
        ("file[!0-9].txt", "file7.txt", False, None),
        ("\\#hash", "#hash", False, True),
        ("# comment\n\n   ", "comment", False, None),
        ("trailing   ", "trailing", False, True),
        ("?.py", "a.py", False, True),
        ("?.py", "ab.py", False, None),
    ],
)
def test_gitignore_rules(rules: str, path: str, is_dir: bool, verdict: bool | None) -> None:
    assert parse_gitignore(rules).verdict(path, is_dir) is verdict


def test_rules_of_a_subdirectory_are_rebased_for_ripgrep() -> None:
    text = "*.o\n/local.txt\n!keep.o\nout/\n# note\n"
    assert rebase_gitignore(text, "") == text.splitlines()
    assert rebase_gitignore(text, "a/b") == [
        "/a/b/**/*.o",
        "/a/b/local.txt",
        "!/a/b/**/keep.o",
        "/a/b/**/out/",
    ]


def _ignored_tree(root: Path) -> None:
    files = {
        ".gitignore": "*.log\n!keep.log\nbuild/\n/only_root.txt\ndocs/*.tmp\n",
        "app.py": "needle = 1\n",
        "debug.log": "needle in a log\n",
        "keep.log": "needle kept\n",
        "only_root.txt": "needle\n",
        "build/out.py": "needle built\n",
        "docs/a.tmp": "needle tmp\n",
        "docs/guide.md": "needle guide\n",
        "sub/.gitignore": "local.txt\n!debug2.log\n",
        "sub/only_root.txt": "needle not at the root\n",
        "sub/local.txt": "needle local\n",
        "sub/debug2.log": "needle re-included\n",
        "sub/deep/local.txt": "needle deep local\n",
        "sub/deep/code.py": "needle deep\n",
        ".hidden/conf.py": "needle hidden\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


EXPECTED_FILES = [
    ".gitignore",
    ".hidden/conf.py",
    "app.py",
    "docs/guide.md",
    "keep.log",
    "sub/.gitignore",
    "sub/debug2.log",
    "sub/deep/code.py",
    "sub/only_root.txt",
]


def _tools(workspace: Path, engine: str) -> ToolRegistry:
    guard, config = Workspace(workspace), SearchConfig(engine=engine)  # type: ignore[arg-type]
    return ToolRegistry([GlobTool(guard, config), GrepTool(guard, config)])


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_glob_and_grep_honour_gitignore(workspace: Path, engine: str) -> None:
    _ignored_tree(workspace)
    tools = _tools(workspace, engine)
    listed = await tools.execute("glob", {"pattern": "**/*"})
    assert listed.text.splitlines() == EXPECTED_FILES
    found = await tools.execute("grep", {"pattern": "needle"})
    assert [line.split(":")[0] for line in found.text.splitlines()] == [
        f for f in EXPECTED_FILES if not f.endswith(".gitignore")
    ]
    # below the root, the root's rules still apply (ripgrep gets them by --ignore-file)
    below = await tools.execute("glob", {"pattern": "**/*", "path": "sub/deep"})
    assert below.text.splitlines() == ["sub/deep/code.py"]
    logs = await tools.execute("grep", {"pattern": "needle", "path": "sub", "include": "*.log"})
    assert logs.text == "sub/debug2.log:1: needle re-included"
    # naming an ignored directory searches it: what is asked for by name is shown
    built = await tools.execute("glob", {"pattern": "build/*.py"})
    assert built.text == "build/out.py"


def _random_tree(root: Path, seed: int) -> None:
    """A tree with the cases the engines must agree on: nested .gitignore files with
    negations, hidden files, binary and CRLF and BOM and Latin-1 files, long lines,
    symlinks, skipped directories and odd names."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "needle", "Needle", "gamma", "TODO", "fix me", "x = 1", "é"]
    dirs = ["", "src", "src/pkg", "src/pkg/sub", "docs", ".github", "build", "node_modules/m",
            "a b", "tests", "tests/data", "vendor/lib"]  # fmt: skip
    for directory in dirs:
        (root / directory).mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("build/\n*.tmp\nvendor/\n!vendor/keep.py\n/docs/*.md\n")
    (root / "src" / ".gitignore").write_text("*.gen.py\n!important.gen.py\nsub/\n")
    (root / "tests" / ".gitignore").write_text("data/*.bin\n")
    for index in range(120):
        directory = rng.choice(dirs)
        suffix = rng.choice([".py", ".md", ".txt", ".tmp", ".gen.py", ".bin", ".log"])
        name = root / directory / f"f{index:03}{suffix}"
        kind = rng.random()
        lines = [
            " ".join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(rng.randint(0, 8))
        ]
        if kind < 0.1:
            name.write_bytes(b"needle\x00binary\x01" + bytes(rng.randrange(256) for _ in range(64)))
        elif kind < 0.2:
            name.write_bytes("\r\n".join(lines).encode() + b"\r\n")
        elif kind < 0.25:
            name.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())
        elif kind < 0.3:
            name.write_bytes("\n".join(lines).encode("latin-1", errors="replace"))
        elif kind < 0.35:
            name.write_text("y" * 2000 + " needle " + "z" * 2000 + "\n")
        else:
            name.write_text("\n".join(lines) + ("\n" if rng.random() < 0.8 else ""))
    (root / "src" / "important.gen.py").write_text("needle important\n")
    (root / "src" / "link.py").symlink_to(root / "src" / "important.gen.py")
    (root / "src" / "linkdir").symlink_to(root / "docs")
    (root / ".hidden.py").write_text("needle hidden\n")


QUERIES: list[tuple[str, dict[str, object]]] = [
    ("glob", {"pattern": "**/*"}),
    ("glob", {"pattern": "**/*.py"}),
    ("glob", {"pattern": "src/**/*.{py,md}"}),
    ("glob", {"pattern": "*", "path": "tests"}),
    ("glob", {"pattern": "**/*", "max_results": 7}),
    ("grep", {"pattern": "needle"}),
    ("grep", {"pattern": "needle", "ignore_case": True, "max_results": 1000}),
    ("grep", {"pattern": "^x = 1$"}),
    ("grep", {"pattern": "TODO|fix me", "include": "*.py"}),
    ("grep", {"pattern": "gamma", "path": "src", "include": "pkg/*.txt"}),
    ("grep", {"pattern": "é"}),
    ("grep", {"pattern": r"\bbeta\b", "max_results": 5}),
    ("grep", {"pattern": "zzz-absent"}),
    ("grep", {"pattern": "alpha(?= beta)"}),  # look-ahead: ripgrep hands over to Python
]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_both_engines_give_the_same_results(workspace: Path, seed: int) -> None:
    _random_tree(workspace, seed)
    await _compare_engines(workspace)


async def test_ripgrep_runs_in_parallel_chunks_keep_the_order(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a few names per ripgrep run, many runs go at once; results keep file order
    and the cap still cuts at the same line."""
    monkeypatch.setattr(matching, "_ARGUMENT_BYTES", 40)
    _random_tree(workspace, 4)
    await _compare_engines(workspace)
    assert _ripgrep_children() == []  # the runs cut short by the cap were killed and reaped


def _ripgrep_children() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("Name") == "rg" and int(fields.get("PPid", "0")) == os.getpid():
            found.append(int(pid))
    return found


async def _compare_engines(workspace: Path) -> None:
    ripgrep, python = _tools(workspace, "ripgrep"), _tools(workspace, "python")
    for name, arguments in QUERIES:
        fast = await ripgrep.execute(name, arguments)
        slow = await python.execute(name, arguments)
        assert fast.text == slow.text, (name, arguments)
        assert not fast.is_error, fast.text
