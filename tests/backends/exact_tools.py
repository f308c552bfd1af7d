"""Tools for the tests of the Ray backend's exact promises (the journal's start, the
time limit, the `call_started` event), built the same way on the caller and on Ray
workers (`build`). Each writes what it did into the workspace, so the tests see effects
without timing anything."""

from __future__ import annotations

import asyncio

from toolbridge import ToolContext, ToolRegistry, current_context, tool
from toolbridge.execution.progress import report_progress


def _log(name: str, text: str) -> None:
    with (current_context().workspace / name).open("a", encoding="utf-8") as file:
        file.write(text + "\n")


@tool(concurrency_safe=True)
async def effect(label: str) -> str:
    """An effect that must happen once (not read-only: never retried, never run twice)."""
    _log("effects.txt", label)
    return f"{label} done"


@tool(concurrency_safe=True)
async def hold(label: str) -> str:
    """Say it started, then wait until cancelled."""
    _log("started.txt", label)
    await asyncio.sleep(3600)
    return "never"


@tool(read_only=True, timeout=3.0)
async def quick(label: str) -> str:
    """Answers at once, within a limit of its own."""
    _log("effects.txt", label)
    return f"{label} in time"


@tool(read_only=True)
async def steps(count: int) -> str:
    """Reports its progress `count` times, then answers."""
    for step in range(1, count + 1):
        report_progress(step, count, f"step {step} of {count}")
        await asyncio.sleep(0)
    return f"{count} steps"


def build(ctx: ToolContext) -> ToolRegistry:
    return ToolRegistry([effect, hold, quick, steps], context=ctx)
