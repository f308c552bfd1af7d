"""exec benchmark: the round trip of `true`, without and with the supervisor, and in bubblewrap.

Run it from the repository root in the project's environment:

    python bench/exec_bench.py            # prints the table and updates docs/benchmarks.md
    python bench/exec_bench.py --no-docs  # prints only

Cases, interleaved round by round in one process (median of --repetitions rounds,
default 61), each running ``/bin/sh -c true``:

- process group only: `run_command` as exec ran it before the supervisor (the host
  starts the shell in a new session and kills the group);
- supervisor: `run_command(..., supervised=True)`, the unsandboxed path now;
- bubblewrap: `run_command` over the sandbox's argv, the sandboxed path now;
- exec tool (none / bwrap): `ToolRegistry.execute("exec", ...)` end to end, with the
  environment scrub, the scratch HOME and the report.

Ratios are against the first case in the same run. Not a test: the suite never runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from toolbridge import ToolContext, ToolRegistry
from toolbridge.process import run_command
from toolbridge.security.sandbox import find_sandbox
from toolbridge.tools.shell import ExecConfig, ExecTool

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## exec"
TRUE = ["/bin/sh", "-c", "true"]

Case = Callable[[], Awaitable[object]]


def cases(workspace: Path) -> dict[str, Case]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    limits = {"time_limit": 30.0, "output_limit": 20_000, "kill_after_bytes": 10_000_000}

    def command(argv: list[str], *, supervised: bool) -> Case:
        return lambda: run_command(argv, cwd=workspace, env=env, supervised=supervised, **limits)

    def tool(**config: str) -> Case:
        exec_tool = ExecTool(workspace, ExecConfig.model_validate(config), environ=env)
        registry = ToolRegistry([exec_tool], context=ToolContext(workspace=workspace))
        return lambda: registry.execute("exec", {"command": "true"})

    found: dict[str, Case] = {
        "process group only (before)": command(TRUE, supervised=False),
        "supervisor (unsandboxed now)": command(TRUE, supervised=True),
    }
    sandbox = find_sandbox("auto", workspace)
    if sandbox is not None:
        argv = sandbox.argv(TRUE, workspace=workspace, cwd=workspace)
        found["bubblewrap (sandboxed now)"] = command(argv, supervised=False)
    found["exec tool, sandbox = none"] = tool(sandbox="none", unsandboxed="allow")
    if sandbox is not None:
        found["exec tool, sandbox = bwrap"] = tool(sandbox="bwrap")
    return found


async def measure(workspace: Path, repetitions: int) -> dict[str, float]:
    """Median ms per round trip of each case, the cases interleaved round by round."""
    runs = cases(workspace)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for name, run in runs.items():  # warm up: imports, page cache
        await run()
    for _ in range(repetitions):
        for name, run in runs.items():
            start = time.perf_counter()
            await run()
            samples[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def render(medians: dict[str, float], command: str) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    base = next(iter(medians.values()))
    lines = [
        SECTION,
        "",
        f"Measured {now} on {platform.processor() or platform.machine()}, "
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} "
        f"cores. Command: `{command}`.",
        "",
        "Round trip of `/bin/sh -c true`, median ms, cases interleaved in one process. The "
        "supervisor is a `python -I -S` process started per call; its cost is that "
        "interpreter's start-up.",
        "",
        "| Case | ms per call | vs process group only |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {ms:.2f} | {ms / base:.2f}x |" for name, ms in medians.items()]
    return "\n".join(lines) + "\n"


def update_docs(section: str) -> None:
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=61)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        medians = await measure(Path(tmp), args.repetitions)
    section = render(medians, "python bench/exec_bench.py")
    print(section)
    if not args.no_docs:
        update_docs(section)


if __name__ == "__main__":
    asyncio.run(main())
