"""Timing harness shared by every runner: calibrate, warm up, time batches, report JSON.

A runner builds `Case`s (one callable per workload and variant) and hands them to
`run_cases`, which times each as batches of N sequential calls inside one event loop
and prints one JSON document on stdout. The clock is the CPU time of the whole process
(`time.process_time_ns`, every thread counted, so a tool run on a worker thread is paid
for): on a machine shared with other work, wall time mostly measures how long the
process waited for a core; the wall time of each batch is kept as well (`wall_*`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

AsyncCall = Callable[[], Awaitable[Any]]
SyncCall = Callable[[], Any]
# What a case's result says about itself: ("ok" | "error", a short excerpt of the text).
Describe = Callable[[Any], tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Case:
    """One thing to time: a zero-argument call that performs one full tool call."""

    workload: str
    variant: str
    call: AsyncCall | SyncCall
    describe: Describe
    is_async: bool = True


@dataclass(frozen=True, slots=True)
class Settings:
    repetitions: int = 15
    batch_ms: float = 60.0


@dataclass(slots=True)
class CaseResult:
    workload: str
    variant: str
    outcome: str
    detail: str
    median_us: float
    min_us: float
    max_us: float
    batch: int
    repetitions: int
    samples_us: list[float] = field(default_factory=list)  # CPU time of the process
    wall_samples_us: list[float] = field(default_factory=list)


async def _time_batch(case: Case, count: int) -> tuple[int, int]:
    """CPU and wall nanoseconds for `count` sequential calls of `case`, in this event loop."""
    cpu, wall = time.process_time_ns, time.perf_counter_ns
    if case.is_async:
        call_async: Any = case.call
        start_cpu, start_wall = cpu(), wall()
        for _ in range(count):
            await call_async()
        return cpu() - start_cpu, wall() - start_wall
    call_sync: Any = case.call
    start_cpu, start_wall = cpu(), wall()
    for _ in range(count):
        call_sync()
    return cpu() - start_cpu, wall() - start_wall


async def _first_result(case: Case) -> Any:
    result = case.call()
    return await result if case.is_async else result


async def measure(case: Case, settings: Settings) -> CaseResult:
    """Warm up while finding a batch size of about `batch_ms`, then time the repetitions."""
    outcome, detail = case.describe(await _first_result(case))
    target_ns = settings.batch_ms * 1e6
    count = 16
    elapsed, _ = await _time_batch(case, count)
    while elapsed < target_ns / 4:  # doubling doubles as the warm-up
        count *= 2
        elapsed, _ = await _time_batch(case, count)
    count = max(1, round(count * target_ns / max(elapsed, 1)))
    samples: list[float] = []
    wall: list[float] = []
    for _ in range(settings.repetitions):
        gc.collect()
        cpu_ns, wall_ns = await _time_batch(case, count)
        samples.append(cpu_ns / count / 1000)
        wall.append(wall_ns / count / 1000)
    return CaseResult(
        workload=case.workload,
        variant=case.variant,
        outcome=outcome,
        detail=detail,
        median_us=statistics.median(samples),
        min_us=min(samples),
        max_us=max(samples),
        batch=count,
        repetitions=settings.repetitions,
        samples_us=samples,
        wall_samples_us=wall,
    )


def excerpt(text: object, limit: int = 160) -> str:
    """One line of at most `limit` characters, for the outcome column."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def versions(*distributions: str) -> dict[str, str]:
    """Installed versions of `distributions` in this interpreter."""
    found: dict[str, str] = {}
    for name in distributions:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def run_cases(
    peer: str,
    label: str,
    build: Callable[[], Awaitable[Sequence[Case]]],
    packages: Sequence[str],
    notes: Sequence[str] = (),
) -> None:
    """Build and time every case in one event loop, then print the JSON report."""
    default = Settings()
    settings = Settings(
        repetitions=int(sys.argv[1]) if len(sys.argv) > 1 else default.repetitions,
        batch_ms=float(sys.argv[2]) if len(sys.argv) > 2 else default.batch_ms,
    )

    async def main() -> list[CaseResult]:
        cases = await build()
        return [await measure(case, settings) for case in cases]

    results = asyncio.run(main())
    report = {
        "peer": peer,
        "label": label,
        "python": platform.python_version(),
        "packages": versions(*packages),
        "notes": list(notes),
        "settings": asdict(settings),
        "cases": [asdict(result) for result in results],
    }
    json.dump(report, sys.stdout)
