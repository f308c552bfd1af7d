"""Tools the backend tests run, built the same way on the caller and on Ray workers.

Each tool writes what it did into the workspace (a shared file system here), so the
tests can see effects, overlap and process ids without timing anything.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

from toolbridge import Tool, ToolContext, current_context, tool, tool_parameters


def _log(name: str, text: str) -> None:
    with (current_context().workspace / name).open("a", encoding="utf-8") as file:
        file.write(text + "\n")


@tool(read_only=True)
async def nap(seconds: float, label: str) -> str:
    """Sleep, writing when it started and ended (read-only: runs together with others)."""
    _log("spans.txt", f"{label} start {time.time()}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _log("cancelled.txt", label)
        raise
    _log("spans.txt", f"{label} end {time.time()}")
    return f"{label} slept"


@tool(read_only=True)
async def meet(label: str, party: int) -> str:
    """Wait until `party` calls of this tool have started (read-only: runs together with
    others). It ends only if the calls run at the same time; alone it fails after 30 s."""
    _log("spans.txt", f"{label} start {time.time()}")
    _log("met.txt", label)
    met = current_context().workspace / "met.txt"
    end = time.monotonic() + 30.0
    while len(met.read_text().split()) < party:
        if time.monotonic() > end:
            raise TimeoutError(f"{label}: only {met.read_text().split()} of {party} ever met")
        await asyncio.sleep(0.02)
    _log("spans.txt", f"{label} end {time.time()}")
    return f"{label} met"


@tool
async def write_step(label: str, seconds: float = 0.05) -> str:
    """Write a step (not read-only: runs alone, in order)."""
    _log("spans.txt", f"{label} start {time.time()}")
    await asyncio.sleep(seconds)
    _log("spans.txt", f"{label} end {time.time()}")
    return f"{label} written"


@tool
async def boom(message: str) -> str:
    """Always fails."""
    raise RuntimeError(message)


@tool(timeout=10)
def block(seconds: float) -> str:
    """Blocks the worker thread: only killing the process stops it. Its limit also covers
    the dispatch to a worker, which must come first (it writes the pid): generous."""
    _log("pids.txt", str(os.getpid()))
    time.sleep(seconds)
    return "woke up"


@tool
def pid() -> int:
    """The id of the process running the call."""
    return os.getpid()


@tool
def die_once(marker: str) -> str:
    """Kills its own process the first time (not read-only: never retried)."""
    _log("effects.txt", marker)
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@tool(read_only=True)
def die_first_time(marker: str) -> str:
    """Read-only: killed on the first attempt, answers on the retry."""
    path = current_context().workspace / f"{marker}.seen"
    if not path.exists():
        path.write_text("x")
        os.kill(os.getpid(), signal.SIGKILL)
    return "answered on retry"


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class SandboxedTool(Tool):
    """Needs a worker where the custom resource 'sandbox' is."""

    name = "sandboxed"
    description = "Runs where a sandbox is."
    ray_resources = {"sandbox": 1}

    async def execute(self, **kwargs: Any) -> str:
        return f"ran in {os.getpid()}"


@tool
def where() -> str:
    """The workspace of the calling session."""
    ctx = current_context()
    (ctx.workspace / "touched").write_text(ctx.session)
    return str(ctx.workspace)


@tool(read_only=True)
def long_text(chars: int) -> str:
    """A long result: capped and saved on the caller's side."""
    return "x" * chars


@tool(requires_approval=True)
def deploy(target: str) -> str:
    """Needs the user's approval; writes what it deployed."""
    _log("deployed.txt", target)
    return f"deployed {target}"


def build(ctx: ToolContext) -> list[Tool]:
    return [
        nap, meet, write_step, boom, block, pid, die_once, die_first_time, SandboxedTool(), where,
        long_text, deploy,
    ]  # fmt: skip


def spans(workspace: Path) -> dict[str, tuple[float, float]]:
    """label -> (start, end) from spans.txt; a label that started and never ended (or ran
    twice) is an AssertionError, not left out."""
    found: dict[str, list[float]] = {}
    for line in (workspace / "spans.txt").read_text().splitlines():
        label, _, stamp = line.split()
        found.setdefault(label, []).append(float(stamp))
    unfinished = {label: times for label, times in found.items() if len(times) != 2}
    assert not unfinished, f"spans that did not start and end once: {unfinished}"
    return {label: (times[0], times[1]) for label, times in found.items()}
