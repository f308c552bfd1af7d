"""W5 timing harness shared by the bench/core/w5_*.py runners (see bench/w5_bench.py).

W5 is one model turn that asks for N concurrency-safe calls of the same tool, which
awaits `asyncio.sleep(0.005)` and returns a short string. A runner names one or more
*variants*: for a batch size N, `make(N)` returns a coroutine function that runs one
batch through the peer's own path and returns `(elapsed_ns, results)`, timing only
that path (building the peer's call objects from the model's output is not timed
unless the peer does it inside its batch path). Every runner also times a bare
`asyncio.gather` of N calls of the tool in its own process, as a check on the floor.

The batch sizes are interleaved (every variant once per size per repetition) after a
warm-up, so a burst of load elsewhere hits all of them alike. The tool counts its
runs: a batch that did not run the tool N times, or whose results do not carry the
tool's text N times, fails the runner. One JSON document goes to stdout.
"""

from __future__ import annotations

import asyncio
import gc
import json
import platform
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness import versions

SLEEP_S = 0.005
TEXT = "napped"
TOOL_NAME = "nap"
TOOL_DESCRIPTION = "Sleep 5 ms and say so."
ARGUMENTS = "{}"  # the raw argument text the model sent with every call
WARMUP = 3
OWN_GATHER = "bare asyncio.gather (this process)"

Batch = Callable[[], Awaitable[tuple[int, Sequence[Any]]]]


@dataclass(slots=True)
class Tally:
    runs: int = 0


TALLY = Tally()


async def nap() -> str:
    """Sleep 5 ms and say so."""
    TALLY.runs += 1
    await asyncio.sleep(SLEEP_S)
    return TEXT


@dataclass(frozen=True, slots=True)
class Variant:
    """One path through a peer: `make(size)` prepares a batch of `size` calls."""

    name: str
    make: Callable[[int], Awaitable[Batch]]


def timed(run: Callable[[], Awaitable[Sequence[Any]]]) -> Batch:
    """A batch that times the whole of `run()`."""

    async def batch() -> tuple[int, Sequence[Any]]:
        start = time.perf_counter_ns()
        results = await run()
        return time.perf_counter_ns() - start, results

    return batch


async def own_gather(size: int) -> Batch:
    async def run() -> Sequence[Any]:
        return await asyncio.gather(*(nap() for _ in range(size)))

    return timed(run)


def count_text(results: Iterable[Any]) -> int:
    """How many results carry the tool's text (each peer wraps it its own way)."""
    return sum(TEXT in repr(result) for result in results)


async def _sample(batch: Batch, size: int, variant: str) -> float:
    before = TALLY.runs
    elapsed_ns, results = await batch()
    ran, returned = TALLY.runs - before, count_text(results)
    if ran != size or returned != size:
        raise RuntimeError(
            f"{variant} at N={size}: the tool ran {ran} times and {returned} results carry "
            f"its text, expected {size} of each; first result: {list(results)[:1]!r}"
        )
    return elapsed_ns / 1e6


async def measure(
    variants: Sequence[Variant], sizes: Sequence[int], repetitions: int
) -> list[dict[str, Any]]:
    everything = [Variant(OWN_GATHER, own_gather), *variants]
    batches = {
        (variant.name, size): await variant.make(size) for size in sizes for variant in everything
    }
    samples: dict[tuple[str, int], list[float]] = {key: [] for key in batches}
    for (name, size), batch in batches.items():
        for _ in range(WARMUP):
            await _sample(batch, size, name)
    for _ in range(repetitions):
        for (name, size), batch in batches.items():
            gc.collect()
            samples[(name, size)].append(await _sample(batch, size, name))
    return [
        {"variant": name, "size": size, "samples_ms": values}
        for (name, size), values in samples.items()
    ]


def run_variants(
    peer: str,
    label: str,
    build: Callable[[], Awaitable[Sequence[Variant]]],
    packages: Sequence[str],
    notes: Sequence[str] = (),
) -> None:
    """argv: repetitions, comma-separated batch sizes. Prints the JSON report."""
    repetitions = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    sizes = [int(s) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else [200]

    async def main() -> list[dict[str, Any]]:
        return await measure(await build(), sizes, repetitions)

    cases = asyncio.run(main())
    report = {
        "peer": peer,
        "label": label,
        "python": platform.python_version(),
        "packages": versions(*packages),
        "notes": list(notes),
        "cases": cases,
    }
    json.dump(report, sys.stdout)
