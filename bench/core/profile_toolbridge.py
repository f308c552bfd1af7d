"""cProfile of toolbridge's hot path: `ToolRegistry.execute` on W1 and W2.

Prints the top functions by cumulative time (and by own time) for each workload, to
show where a call's microseconds go. cProfile slows every Python call down, so read
the shares, not the absolute numbers.

    bench/.venvs/toolbridge/bin/python bench/core/profile_toolbridge.py [calls] [top]
"""

from __future__ import annotations

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
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    sys.stdout.write("\n".join(profile_workload(key, calls, top) for key in ("W1", "W2")))


if __name__ == "__main__":
    main()
