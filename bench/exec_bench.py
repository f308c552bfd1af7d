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
import resource
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


def child_cpu() -> float:
    """CPU seconds (user + system) of every child process reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def measure(workspace: Path, repetitions: int) -> dict[str, tuple[float, float]]:
    """Median wall ms and mean child CPU ms per round trip of each case, interleaved.

    Child CPU time barely depends on how busy the machine is; wall time does.
    """
    runs = cases(workspace)
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, float] = dict.fromkeys(runs, 0.0)
    for run in runs.values():  # warm up: imports, page cache
        await run()
    for _ in range(repetitions):
        for name, run in runs.items():
            start, cpu_start = time.perf_counter(), child_cpu()
            await run()
            wall[name].append((time.perf_counter() - start) * 1000)
            cpu[name] += child_cpu() - cpu_start
    return {name: (statistics.median(wall[name]), cpu[name] * 1000 / repetitions) for name in runs}


def render(medians: dict[str, tuple[float, float]], command: str) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    base, base_cpu = next(iter(medians.values()))
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    lines = [
        SECTION,
        "",
        f"Measured {now} on {platform.processor() or platform.machine()}, "
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} "
        f"cores, load average {load}. Command: `{command}`.",
        "",
        "Round trip of `/bin/sh -c true`, cases interleaved in one process: median wall "
        "ms, and the mean CPU time of the child processes (user + system), which depends "
        "less on how busy the machine is. The supervisor is a `python -I -S` process "
        "started per call; its cost is that interpreter's start-up.",
        "",
        "| Case | wall ms | vs process group only | child CPU ms | vs process group only |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {name} | {ms:.2f} | {ms / base:.1f}x | {cpu:.2f} | {cpu / base_cpu:.1f}x |"
        for name, (ms, cpu) in medians.items()
    ]
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
