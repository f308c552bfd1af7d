"""exec benchmark: the round trip of `true`, without and with the supervisor, and in bubblewrap.

Run it from the repository root in the project's environment:

    python bench/exec_bench.py            # prints the table and updates docs/benchmarks.md
    python bench/exec_bench.py --no-docs  # prints only

Cases, interleaved round by round in one process (median of --repetitions rounds,
default 61), each running ``/bin/sh -c true``:

- process group only: how exec ran a command before the supervisor (a new session,
  wait, kill the group), with asyncio's subprocess machinery;
- supervisor: `run_command`, the command forked by a call supervisor that the
  long-lived supervisor server forks (no interpreter start per call);
- `python -I -S -c pass`: what a supervisor started per call would cost at least;
- bubblewrap, with and without the supervisor around it;
- exec tool (none / bwrap): `ToolRegistry.execute("exec", ...)` end to end, with the
  environment scrub, the scratch HOME and the report; with bwrap the command forks in
  the context session's open sandbox (started at warm-up), no bubblewrap per call;
- write_stdin round trip (none / bwrap): ``echo hi`` written to an open ``sh`` exec
  session, waiting for ``hi`` (``wait_for``), end to end through the registry.

Ratios are against the first case in the same run. Not a test: the suite never runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import re
import resource
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from toolbridge import ToolContext, ToolRegistry
from toolbridge.core.tool import ToolResult
from toolbridge.execution.process import Supervisor, run_command
from toolbridge.security.sandbox import find_sandbox
from toolbridge.tools.shell import ExecConfig, ExecTool

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## exec"
TRUE = ["/bin/sh", "-c", "true"]
PYTHON_START = "for scale: `python -I -S -c pass`"
OPEN_SANDBOX = "exec tool, sandbox = bwrap (the session's open sandbox)"
STDIN_BWRAP = "write_stdin round trip, sandbox = bwrap"

Case = Callable[[], Awaitable[object]]


async def plain_subprocess(argv: list[str], workspace: Path, env: dict[str, str]) -> int:
    """How exec ran a command before the supervisor: a new session, wait, kill the group."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=workspace,
        env=env,
        start_new_session=True,
    )
    code = await process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    return code


def cases(workspace: Path, supervisors: list[Supervisor], tools: list[ExecTool]) -> dict[str, Case]:
    """The cases by name; every supervisor server they use is appended to `supervisors`,
    every exec tool to `tools` (closed at the end)."""
    supervisor = Supervisor()
    supervisors.append(supervisor)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    limits = {"time_limit": 30.0, "output_limit": 20_000, "kill_after_bytes": 10_000_000}

    def supervised(argv: list[str]) -> Case:
        return lambda: run_command(argv, cwd=workspace, env=env, supervisor=supervisor, **limits)

    def make_registry(config: dict[str, str]) -> ToolRegistry:
        exec_tool = ExecTool(workspace, ExecConfig.model_validate(config), environ=env)
        supervisors.append(exec_tool.supervisor)
        tools.append(exec_tool)
        return ToolRegistry(
            [exec_tool, *exec_tool.companions()], context=ToolContext(workspace=workspace)
        )

    def tool(**config: str) -> Case:
        registry = make_registry(config)
        return lambda: registry.execute("exec", {"command": "true"})

    def stdin_round_trip(**config: str) -> Case:
        registry = make_registry(config)
        session: list[int] = []

        async def run() -> ToolResult:
            if not session:  # the warm-up round opens the sh session
                started = await registry.execute("exec", {"command": "sh", "yield_time_ms": 0})
                session.append(started.metadata["session_id"])
            write = {"session_id": session[0], "chars": "echo hi\n", "wait_for": "hi"}
            result = await registry.execute("write_stdin", write)
            assert result.text.startswith("hi\n"), result.text
            return result

        return run

    found: dict[str, Case] = {
        "process group only (before)": lambda: plain_subprocess(TRUE, workspace, env),
        "supervisor": supervised(TRUE),
        PYTHON_START: lambda: plain_subprocess(
            [sys.executable, "-I", "-S", "-c", "pass"], workspace, env
        ),
    }
    sandbox = find_sandbox("auto", workspace)
    if sandbox is not None:
        argv = sandbox.argv(TRUE, workspace=workspace, cwd=workspace)
        found["bubblewrap, no supervisor"] = lambda: plain_subprocess(argv, workspace, env)
        found["supervisor + bubblewrap"] = supervised(argv)
    found["exec tool, sandbox = none"] = tool(sandbox="none", unsandboxed="allow")
    if sandbox is not None:
        found[OPEN_SANDBOX] = tool(sandbox="bwrap")
    found["write_stdin round trip, sandbox = none"] = stdin_round_trip(
        sandbox="none", unsandboxed="allow"
    )
    if sandbox is not None:
        found[STDIN_BWRAP] = stdin_round_trip(sandbox="bwrap")
    return found


def tree_cpu(supervisors: list[Supervisor]) -> float:
    """CPU seconds (user + system) of every reaped child, and of every process under each
    supervisor server (a sandbox's too), with the call supervisors each reaped."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    ticks = os.sysconf("SC_CLK_TCK")
    pending = [supervisor.pid for supervisor in supervisors if supervisor.pid is not None]
    while pending:
        pid = pending.pop()
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(field) for field in stat[11:15]) / ticks  # utime .. cstime
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            pending += [int(child) for child in children]
    return total


async def measure(workspace: Path, repetitions: int) -> dict[str, tuple[float, float]]:
    """Median wall ms per round trip (cases interleaved) and mean CPU ms (case by case).

    CPU time barely depends on how busy the machine is; wall time does. It is summed
    over a block of calls of one case, after the servers had time to reap, because a
    server accounts a call supervisor only once it has reaped it.
    """
    supervisors: list[Supervisor] = []
    tools: list[ExecTool] = []
    runs = cases(workspace, supervisors, tools)
    wall: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():  # warm up: imports, page cache, servers started
        await run()
    for _ in range(repetitions):
        for name, run in runs.items():
            start = time.perf_counter()
            await run()
            wall[name].append((time.perf_counter() - start) * 1000)
    cpu: dict[str, float] = {}
    for name, run in runs.items():
        await asyncio.sleep(0.2)
        before = tree_cpu(supervisors)
        for _ in range(repetitions):
            await run()
        await asyncio.sleep(0.2)
        cpu[name] = (tree_cpu(supervisors) - before) * 1000 / repetitions
    for exec_tool in tools:
        exec_tool.close()
    for supervisor in supervisors:
        supervisor.close()
    return {name: (statistics.median(wall[name]), cpu[name]) for name in runs}


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
        "Round trip of `/bin/sh -c true` in one process: median wall ms (cases "
        "interleaved), and mean CPU ms (user + system) of every process the call involved, "
        "the supervisor server's share included, which depends less on how busy the "
        "machine is. The server starts once per context session (in its sandbox, with "
        "bwrap); per call it forks. The write_stdin rows are a round trip to an open `sh` "
        "session instead: `echo hi` written, `hi` read back; their CPU is nearly all in "
        "this process, which the CPU column does not count (it counts child processes).",
        "",
        "| Case | wall ms | vs process group only | CPU ms | vs process group only |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {name} | {ms:.2f} | {ms / base:.1f}x | {cpu:.2f} | {cpu / base_cpu:.1f}x |"
        for name, (ms, cpu) in medians.items()
    ]
    wall, cpu = medians["supervisor"]
    python_wall, python_cpu = medians[PYTHON_START]
    lines += [
        "",
        f"The supervisor adds {wall - base:.1f} ms wall and {cpu - base_cpu:.1f} ms CPU per "
        f"call; a supervisor started per call would add at least {python_wall - base:.1f} ms "
        f"wall and {python_cpu - base_cpu:.1f} ms CPU (an interpreter start).",
    ]
    if OPEN_SANDBOX in medians:
        opened, before = medians[OPEN_SANDBOX][0], medians["supervisor + bubblewrap"][0]
        stdin = medians[STDIN_BWRAP][0]
        lines += [
            "",
            f"A plain exec in the session's open sandbox takes {opened:.1f} ms median "
            f"(target: at most 10), against {before:.1f} ms for a bubblewrap started per "
            f"call ({before / opened:.1f}x); a write_stdin round trip to an open sandboxed "
            f"`sh` takes {stdin:.1f} ms (target: at most 5).",
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
