"""Tools for the tests at the seam between Ray and the journal, progress and time limits,
built the same way on the caller and on Ray workers (`build`).

Each tool writes what it did into the workspace (a shared file system here), so the tests
see effects and process ids without timing anything.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import signal
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolbridge import Tool, ToolContext, ToolRegistry, current_context, tool, tool_parameters
from toolbridge.execution.progress import report_progress

_built: weakref.WeakSet[ToolRegistry] = weakref.WeakSet()
_serials = itertools.count(1)


def _log(name: str, text: str) -> None:
    with (current_context().workspace / name).open("a", encoding="utf-8") as file:
        file.write(text + "\n")


@tool(concurrency_safe=True)
async def hold(label: str) -> str:
    """Say it started (with its process id), then wait until cancelled or killed. Not
    read-only: never retried on another worker."""
    _log("started.txt", f"{label} {os.getpid()}")
    await asyncio.sleep(3600)
    return "never"


@tool(concurrency_safe=True)
async def hold_until_released(label: str) -> str:
    """Say it started, then wait until a file named ``release`` appears (or 60 s pass)."""
    _log("started.txt", f"{label} {os.getpid()}")
    release = current_context().workspace / "release"
    for _ in range(1200):
        if release.exists():
            return f"{label} released"
        await asyncio.sleep(0.05)
    return f"{label} never released"


@tool(concurrency_safe=True)
async def mark(label: str) -> str:
    """An effect that must happen once: a line in effects.txt (not read-only, not retried)."""
    _log("effects.txt", label)
    return f"{label} marked"


@tool(concurrency_safe=True)
def mark_sync(label: str) -> str:
    """`mark` as a sync function: it runs in one of its worker's threads."""
    _log("effects.txt", label)
    return f"{label} marked"


@tool(concurrency_safe=True)
def hold_sync(label: str) -> str:
    """A sync tool (in one of its worker's threads): says it started, then holds its thread
    until a file named ``release`` appears (or 60 s pass). Not read-only: never retried."""
    _log("started.txt", f"{label} {os.getpid()}")
    release = current_context().workspace / "release"
    for _ in range(1200):
        if release.exists():
            return f"{label} released"
        time.sleep(0.05)
    return f"{label} never released"


@tool(concurrency_safe=True, timeout=0.5)
def limited_sync(label: str) -> str:
    """A sync tool with a short limit: says it started, then answers."""
    _log("started.txt", f"{label} {os.getpid()}")
    return f"{label} done"


@tool
async def stubborn(label: str) -> str:
    """Says it started, then ignores being cancelled (a misbehaving tool): only killing
    its process stops it."""
    _log("started.txt", f"{label} {os.getpid()}")
    while True:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:  # swallowed on purpose: the fault under test
            continue


@tool(read_only=True)
async def worker_pid() -> int:
    """The process id of the worker that runs the call."""
    return os.getpid()


@tool(read_only=True)
def live_registries() -> int:
    """How many registries `build` made in this process are still alive."""
    gc.collect()
    return len(_built)


@tool(read_only=True)
async def cancels_itself(reason: str) -> str:
    """Raises `CancelledError` by itself, though nobody cancelled it (a library bug, say)."""
    raise asyncio.CancelledError(reason)


@tool(read_only=True, timeout=0.5)
async def slow_start(label: str) -> str:
    """Has a short limit; says when it started."""
    _log("started.txt", f"{label} {os.getpid()}")
    await asyncio.sleep(3600)
    return "never"


@tool(read_only=True)
async def progress_then_die(label: str) -> str:
    """Reports progress, then kills its own process the first time; on the retry it
    reports again and answers."""
    first = not (current_context().workspace / f"{label}.died").exists()
    report_progress(1, 2, "half way")
    if first:
        (current_context().workspace / f"{label}.died").write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    report_progress(2, 2, "done")
    return f"{label} answered"


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsQuantum(Tool):
    """Needs a resource no node of the test cluster has."""

    name = "needs_quantum"
    description = "Runs where a quantum chip is."
    ray_resources = {"quantum_chip": 1}
    timeout = 1.0

    async def execute(self, **kwargs: Any) -> str:
        return "ran"


def build(ctx: ToolContext) -> ToolRegistry:
    serial = next(_serials)

    @tool(read_only=True)
    def registry_serial() -> int:
        """Which registry of this process runs the call (numbered as they are built)."""
        return serial

    tools = [hold, hold_until_released, mark, live_registries, cancels_itself, slow_start]
    tools += [progress_then_die, registry_serial, stubborn, mark_sync, hold_sync]
    tools += [limited_sync, worker_pid]
    registry = ToolRegistry([*tools, NeedsQuantum()], context=ctx)
    _built.add(registry)
    return registry


_threads: list[ThreadPoolExecutor] = []


def build_one_thread(ctx: ToolContext) -> ToolRegistry:
    """`build`, on a worker that has one thread for sync tools (far fewer than its slots),
    whatever the sessions: a second sync call waits for the first to give it back."""
    import ray

    if ray.get_runtime_context().get_actor_id() is not None and not _threads:  # a worker
        _threads.append(ThreadPoolExecutor(max_workers=1))
        asyncio.get_running_loop().set_default_executor(_threads[0])
    return build(ctx)


def build_logging(ctx: ToolContext) -> ToolRegistry:
    """`build`, on a worker whose toolbridge warnings go to ``worker.log`` in the workspace
    (a library's logs go where the application sends them: here, the test)."""
    into = str(ctx.workspace / "worker.log")
    logger = logging.getLogger("toolbridge")
    if not any(getattr(h, "baseFilename", None) == into for h in logger.handlers):
        logger.addHandler(logging.FileHandler(into))
    return build(ctx)
