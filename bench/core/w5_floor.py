"""W5 floor: a bare `asyncio.gather` of N calls of the tool, nothing else.

    bench/.venvs/floor/bin/python bench/core/w5_floor.py [repetitions] [sizes]

The least any executor can do for a batch of concurrency-safe calls: every ratio in
the W5 table is against this process's median at the same batch size.
"""

from __future__ import annotations

from collections.abc import Sequence

from w5_harness import Variant, run_variants


async def build() -> Sequence[Variant]:
    return []


if __name__ == "__main__":
    run_variants("floor", "floor", build, [])
