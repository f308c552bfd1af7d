"""cProfile of toolbridge's hot path: `ToolRegistry.execute` on W1 and W2 (or the given ones).

Prints the top functions by cumulative time (and by own time) for each workload, to
show where a call's microseconds go. cProfile slows every Python call down, so read
the shares, not the absolute numbers.

    bench/.venvs/toolbridge/bin/python bench/core/profile_toolbridge.py [--calls N] [W1 W4 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys

from peer_toolbridge import build_registry
from workloads import WORKLOADS


def profile_workload(key: str, calls: int, top: int) -> str:
    workload = next(w for w in WORKLOADS if w.key == key)
    registry = build_registry()

    async def run(count: int) -> None:
        for _ in range(count):
            await registry.execute(workload.tool_name, workload.arguments)

    async def main() -> None:
        await run(200)  # warm-up outside the profile
        profiler.enable()
        await run(calls)
        profiler.disable()

    profiler = cProfile.Profile()
    asyncio.run(main())
    out = io.StringIO()
    out.write(f"### {key}: {workload.title} ({calls} calls of ToolRegistry.execute)\n\n")
    for order in ("cumulative", "tottime"):
        stats = pstats.Stats(profiler, stream=out)
        stats.strip_dirs().sort_stats(order).print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description="cProfile of ToolRegistry.execute")
    parser.add_argument("workloads", nargs="*", default=["W1", "W2"])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    reports = [profile_workload(key, args.calls, args.top) for key in args.workloads]
    sys.stdout.write("\n".join(reports))


if __name__ == "__main__":
    main()
