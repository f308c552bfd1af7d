"""Executor benchmark: batch scheduling cost against a bare asyncio.gather, and per-call overhead.

Run it from the repository root in the project's environment:

    python bench/executor_bench.py            # prints the tables and updates docs/benchmarks.md
    python bench/executor_bench.py --no-docs  # prints only

W5: a batch of 200 concurrency-safe calls that each await a 5 ms sleep, run by
`ToolExecutor.run`, next to a bare `asyncio.gather` of the same coroutines and a gather
of `ToolRegistry.execute` calls, interleaved in the same process (median of
--repetitions batches, default 41). Target: executor within 1.3x of the bare gather.

Overhead: batches of N cheap calls (N = 10 ... 10,000), executor minus the registry's
own cost for the same calls (prepare_call + run_prepared), in µs per call, for the
sequential path (tools that are not concurrency-safe) and the concurrent path (a
gather of the same). Target: at most 2 µs per call at N = 1,000, flat in N.
Not a test: the test suite never runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from toolbridge import ToolCallRequest, ToolContext, ToolRegistry, tool
from toolbridge.execution.executor import ExecutionPolicy, ToolExecutor

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## Executor"
PEERS_HEADING = "### W5 against the peers"  # written by bench/w5_bench.py
PEERS_PLACEHOLDER = "<peers>"
PEERS_MISSING = "The peers' W5 numbers come from `python3.11 bench/w5_bench.py`."


def make_registry(workspace: Path) -> ToolRegistry:
    @tool(read_only=True)
    async def nap() -> None:
        await asyncio.sleep(0.005)

    @tool(read_only=True)
    async def cheap_safe(i: int) -> int:
        return i

    @tool
    async def cheap(i: int) -> int:
        return i

    return ToolRegistry([nap, cheap_safe, cheap], context=ToolContext(workspace=workspace))


async def timed(run: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await run()
    return time.perf_counter() - start


async def w5(registry: ToolRegistry, repetitions: int) -> dict[str, float]:
    nap = registry.get("nap")
    assert nap is not None
    calls = [ToolCallRequest(f"c{i}", "nap", {}) for i in range(200)]
    executor = ToolExecutor(registry)
    untraced = ToolExecutor(registry, ExecutionPolicy(tracing=False))

    async def bare() -> object:
        return await asyncio.gather(*(nap.execute() for _ in range(200)))

    async def registry_gather() -> object:
        return await asyncio.gather(*(registry.execute("nap", {}, call_id=c.id) for c in calls))

    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "bare asyncio.gather": bare,
        "gather of ToolRegistry.execute": registry_gather,
        "ToolExecutor.run": lambda: executor.run(calls),
        "ToolExecutor.run, tracing off": lambda: untraced.run(calls),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(3):
        for run in cases.values():
            await run()
    for _ in range(repetitions):
        for name, run in cases.items():
            samples[name].append(await timed(run))
    return {name: statistics.median(values) * 1000 for name, values in samples.items()}


async def overhead(
    registry: ToolRegistry, sizes: list[int], budget: float
) -> list[dict[str, float]]:
    rows = []
    for size in sizes:
        row: dict[str, float] = {"n": size}
        for path, name in (("sequential", "cheap"), ("concurrent", "cheap_safe")):
            calls = [ToolCallRequest(f"c{i}", name, {"i": i}) for i in range(size)]
            executor = ToolExecutor(registry)
            untraced = ToolExecutor(registry, ExecutionPolicy(tracing=False))

            async def one(call: ToolCallRequest) -> object:
                prepared = registry.prepare_call(call.name, call.arguments)
                return await registry.run_prepared(prepared, call_id=call.id)

            async def baseline(calls: list[ToolCallRequest] = calls, path: str = path) -> None:
                if path == "sequential":
                    for call in calls:
                        await one(call)
                else:
                    await asyncio.gather(*(one(call) for call in calls))

            repetitions = max(5, int(budget / (size * 30e-6)))
            cases = {
                "registry": baseline,
                "executor": lambda calls=calls, ex=executor: ex.run(calls),
                "untraced": lambda calls=calls, ex=untraced: ex.run(calls),
            }
            samples: dict[str, list[float]] = {k: [] for k in cases}
            for run in cases.values():
                await run()
            for _ in range(repetitions):
                for key, run in cases.items():
                    samples[key].append(await timed(run))
            per_call = {k: statistics.median(v) / size * 1e6 for k, v in samples.items()}
            row[f"{path} registry"] = per_call["registry"]
            row[f"{path} overhead"] = per_call["executor"] - per_call["registry"]
            row[f"{path} overhead untraced"] = per_call["untraced"] - per_call["registry"]
        rows.append(row)
    return rows


def render(w5_ms: dict[str, float], rows: list[dict[str, float]], command: str) -> str:
    floor = w5_ms["bare asyncio.gather"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        SECTION,
        "",
        f"Measured {now} on {platform.processor() or platform.machine()}, "
        f"{platform.platform()}, Python {platform.python_version()}. Command: `{command}`.",
        "",
        "### W5: 200 concurrency-safe calls, each awaiting a 5 ms sleep",
        "",
        "Median batch time in one process, cases interleaved. Target: ToolExecutor.run "
        "within 1.3x of the bare gather.",
        "",
        "| Case | ms per batch | vs bare gather |",
        "| --- | --- | --- |",
    ]
    for name, value in w5_ms.items():
        lines.append(f"| {name} | {value:.1f} | {value / floor:.2f}x |")
    lines += [
        "",
        PEERS_PLACEHOLDER,
        "",
        "### Executor overhead per call on top of the registry",
        "",
        "µs per call: the registry's own cost (prepare_call + run_prepared, sequential "
        "awaits or one gather), then what `ToolExecutor.run` adds with the default policy "
        "(OpenTelemetry API installed, no SDK configured) and with tracing off. "
        "Target: at most 2 µs at 1,000 calls, flat in N.",
        "",
        "| N | sequential: registry | + executor | + executor, untraced "
        "| concurrent: registry | + executor | + executor, untraced |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {int(row['n']):,} | {row['sequential registry']:.1f} "
            f"| {row['sequential overhead']:+.2f} | {row['sequential overhead untraced']:+.2f} "
            f"| {row['concurrent registry']:.1f} | {row['concurrent overhead']:+.2f} "
            f"| {row['concurrent overhead untraced']:+.2f} |"
        )
    return "\n".join(lines) + "\n"


def update_docs(section: str) -> None:
    """Write `section`, keeping the peers' W5 subsection that bench/w5_bench.py wrote."""
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    peers = re.search(rf"^{re.escape(PEERS_HEADING)}\n.*?(?=^### |^## |\Z)", text, re.S | re.M)
    kept = peers.group(0).rstrip("\n") if peers else PEERS_MISSING
    section = section.replace(PEERS_PLACEHOLDER, kept)
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=41)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per overhead case")
    parser.add_argument("--no-docs", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        registry = make_registry(Path(folder))
        w5_ms = await w5(registry, options.repetitions)
        rows = await overhead(registry, [10, 100, 1_000, 10_000], options.budget)
    section = render(w5_ms, rows, "python bench/executor_bench.py")
    print(section)
    if not options.no_docs:
        update_docs(section)


if __name__ == "__main__":
    asyncio.run(main())
