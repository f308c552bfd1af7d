"""Search benchmark: glob and grep on 100,000 files, ripgrep engine, Python engine, plain rg.

Run it from the repository root in the project's environment (about a minute):

    python bench/search_bench.py            # prints the table and updates docs/benchmarks.md
    python bench/search_bench.py --no-docs  # prints only
    python bench/search_bench.py --files 20000

It generates a tree of --files small text files (1,000 directories, a .gitignore that
ignores one directory in ten) in a temporary directory (in /dev/shm when there is one),
then times each query on both engines of the glob and grep tools (a tool call through
`ToolRegistry.execute`, the deadline raised so that nothing is cut) and the same query
as a plain ``rg`` command (no workspace guard, no re-sorting, no result cap).
Each timing is the best of --repetitions runs; the Python engine runs once (it is the
slow one). Ratios compare numbers of one run on one machine. Not a test: the test
suite never runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolbridge import ToolRegistry
from toolbridge.security.workspace import Workspace
from toolbridge.tools.search import GlobTool, GrepTool, SearchConfig

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## Search: glob and grep on 100,000 files"
WORDS = ["alpha", "beta", "gamma", "delta", "return", "import", "class", "value", "x = 1"]


def generate(root: Path, files: int, seed: int = 7) -> None:
    """`files` files over 1,000 directories (10 top-level x 100), about 300 bytes each."""
    rng = random.Random(seed)
    top = [f"pkg{t}" for t in range(10)]
    (root / ".gitignore").write_text("pkg9/\n*.log\n")
    directories = [root / t / f"mod{m:02}" for t in top for m in range(100)]
    for directory in directories:
        directory.mkdir(parents=True)
    for index in range(files):
        directory = directories[index % len(directories)]
        suffix = (".py", ".md", ".txt", ".log")[index % 4]
        lines = [" ".join(rng.choices(WORDS, k=6)) for _ in range(8)]
        if index % 1013 == 5:  # about 100 files, spread over directories and suffixes
            lines[3] = "needle = find_the_needle()"
        (directory / f"file{index:06}{suffix}").write_text("\n".join(lines) + "\n")


def tools(root: Path, engine: str) -> ToolRegistry:
    guard = Workspace(root)
    config = SearchConfig(engine=engine)  # type: ignore[arg-type]
    glob, grep = GlobTool(guard, config), GrepTool(guard, config)
    glob.deadline = grep.deadline = 600.0  # measure the whole search, never cut it
    return ToolRegistry([glob, grep])


async def best(run: Callable[[], Awaitable[Any]], repetitions: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repetitions):
        start = time.perf_counter()
        result = await run()
        times.append(time.perf_counter() - start)
    return min(times), result


def call(registry: ToolRegistry, name: str, arguments: dict[str, Any]) -> Callable[[], Any]:
    return lambda: registry.execute(name, arguments)


def plain_rg(root: Path, arguments: list[str]) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        process = await asyncio.create_subprocess_exec(
            "rg", "--no-config", "--no-require-git", *arguments, cwd=root,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        output, _ = await process.communicate()
        return output.count(b"\n")

    return run


QUERIES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("glob `**/*.py`", "glob", {"pattern": "**/*.py", "max_results": 5000},
     ["--files", "--glob", "*.py"]),
    ("grep `needle` (rare literal)", "grep", {"pattern": "needle", "max_results": 1000},
     ["--line-number", "needle"]),
    ("grep `needle`, include `*.py`", "grep",
     {"pattern": "needle", "include": "*.py", "max_results": 1000},
     ["--line-number", "--glob", "*.py", "needle"]),
    ("grep `cl[a-z]ss \\w+ = 1$` (regex)", "grep",
     {"pattern": r"cl[a-z]ss \w+ = 1$", "max_results": 1000},
     ["--line-number", r"cl[a-z]ss \w+ = 1$"]),
]  # fmt: skip


async def measure(root: Path, repetitions: int) -> list[tuple[str, float, float, float, int]]:
    rows = []
    fast, slow = tools(root, "ripgrep"), tools(root, "python")
    for label, name, arguments, rg_arguments in QUERIES:
        rg_s, rg_lines = await best(plain_rg(root, rg_arguments), repetitions)
        fast_s, fast_result = await best(call(fast, name, arguments), repetitions)
        slow_s, slow_result = await best(call(slow, name, arguments), 1)
        assert fast_result.text == slow_result.text, f"the engines disagree on {label}"
        rows.append((label, rg_s, fast_s, slow_s, len(fast_result.text.splitlines())))
        print(f"{label}: rg {rg_s:.3f} s ({rg_lines} lines), ripgrep engine {fast_s:.3f} s, "
              f"python engine {slow_s:.3f} s", flush=True)  # fmt: skip
    return rows


def render(rows: list[tuple[str, float, float, float, int]], files: int, command: str) -> str:
    lines = [
        SECTION,
        "",
        f"`{command}` ({datetime.date.today()}, Python {platform.python_version()}, "
        f"{_rg_version()}, {platform.machine()}). A generated tree of {files:,} files in "
        "1,000 directories, a tenth of them ignored by `.gitignore`; one tool call through "
        "`ToolRegistry.execute` per query, best of the repetitions (the Python engine: one "
        "run). Both engines returned the same text for every query.",
        "",
        "| query | plain `rg` | ripgrep engine | Python engine | Python / ripgrep | lines |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, rg_s, fast_s, slow_s, count in rows:
        lines.append(
            f"| {label} | {rg_s * 1000:.0f} ms | {fast_s * 1000:.0f} ms | {slow_s * 1000:.0f} ms "
            f"| {slow_s / fast_s:.1f}x | {count} |"
        )
    lines += [
        "",
        "Plain `rg` (with `--no-require-git`, so that it reads the `.gitignore` too) walks "
        "and searches in parallel with no guard, and finds every match: it has no overall "
        "result cap, where the tools stop at `max_results`. The ripgrep engine lists "
        "the files first (`rg --files`, sorted into walk order so that results and limits "
        "match the Python engine), then searches the listed files with `rg --json` (up to "
        "four single-threaded runs over chunks of names, joined in order) and checks every "
        "matching file again through the workspace guard. The "
        "Python engine walks with directory file descriptors (no symlink followed), applies "
        "`.gitignore` itself, reads each file through the guard and matches in a worker "
        "process. grep's 10 s deadline applies to both; the machine is shared, so compare "
        "the ratios rather than the absolute times.",
    ]
    return "\n".join(lines) + "\n"


def _rg_version() -> str:
    done = subprocess.run(["rg", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.stdout else "ripgrep (unknown version)"


def update_docs(section: str) -> None:
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--no-docs", action="store_true")
    options = parser.parse_args()
    if shutil.which("rg") is None:
        raise SystemExit("ripgrep (rg) is not on PATH: install it (apt-get install ripgrep)")
    # In memory where there is a tmpfs: writing 100,000 files to a busy disk takes minutes.
    scratch = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: ASYNC240
    with tempfile.TemporaryDirectory(prefix="toolbridge-search-bench-", dir=scratch) as folder:
        root = Path(folder)
        start = time.perf_counter()
        generate(root, options.files)
        print(f"generated {options.files} files in {time.perf_counter() - start:.1f} s")
        rows = await measure(root, options.repetitions)
    command = "python bench/search_bench.py"
    if options.files != 100_000:
        command += f" --files {options.files}"
    section = render(rows, options.files, command)
    print(section)
    if not options.no_docs and options.files == 100_000:
        update_docs(section)


if __name__ == "__main__":
    asyncio.run(main())
