"""Tools whose outcomes must read the same on every backend, built the same way on the
caller and on Ray workers (`build`)."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from toolbridge import (
    Tool,
    ToolContext,
    ToolExecutionError,
    ToolResult,
    current_context,
    tool,
    tool_parameters,
)
from toolbridge.core.errors import WorkspaceViolation
from toolbridge.execution.progress import report_progress


@tool(read_only=True)
async def add(a: int, b: int) -> dict[str, int]:
    """A plain success with a structured value."""
    return {"sum": a + b}


@tool(read_only=True)
async def refuse(path: str) -> str:
    """Fails the way a tool says it failed, with a message and hint for the model."""
    raise ToolExecutionError(f"no file at {path!r}", hint="List the folder first.")


@tool(read_only=True)
async def error_result(path: str) -> ToolResult:
    """Returns an error result of its own."""
    return ToolResult.error(f"{path} is locked", metadata={"locked": path})


@tool(read_only=True)
async def crash(message: str) -> str:
    """Raises an unexpected exception."""
    raise ValueError(message)


@tool(read_only=True)
async def malformed() -> ToolResult:
    """Returns a result that cannot be sent back (its content is a number)."""
    return ToolResult(42)  # type: ignore[arg-type]


@tool(read_only=True)
async def cancels_itself(reason: str) -> str:
    """Raises `CancelledError` by itself, though nobody cancelled the call (a library's
    own cancelled future, say): a failure of this call, not a stop of the run."""
    raise asyncio.CancelledError(reason)


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@tool(read_only=True)
async def unreadable_error() -> str:
    """Raises an exception whose own text cannot be read (its ``__str__`` raises)."""
    raise _Unreadable


@tool(read_only=True)
async def refuse_with_objects(path: str) -> str:
    """Fails with a message and hint that are not text (a path, a number): read as text."""
    raise ToolExecutionError(Path(path), hint=404)  # type: ignore[arg-type]


@tool(read_only=True)
async def exits_unreadably() -> str:
    """Raises `SystemExit` (which stops a local run) with a code whose text cannot be read."""
    raise SystemExit(_Unreadable())


@tool(read_only=True)
async def locked_metadata() -> ToolResult:
    """A result whose metadata holds what cannot leave its process (a lock)."""
    return ToolResult("fine", metadata={"lock": threading.Lock(), "kept": 1})


@tool(read_only=True, timeout=0.5)
async def too_slow(seconds: float) -> str:
    """Outlives its time limit."""
    await asyncio.sleep(seconds)
    return "finished"


@tool(timeout=0.5)
async def stubborn() -> str:
    """Ignores being cancelled (a misbehaving tool): only killing its process stops it."""
    (current_context().workspace / "stubborn.pid").write_text(str(os.getpid()))
    while True:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:  # swallowed on purpose: the fault under test
            continue


@tool
async def read_secret(spelling: str) -> str:
    """Refused by the workspace guard, whatever the spelling (the loop guard counts it).
    Not read-only, so calls run in order and the guard counts them in that order."""
    raise WorkspaceViolation(f"{spelling!r} is outside the workspace", target="/etc/shadow")


@tool(read_only=True)
async def wait_forever(label: str) -> str:
    """Says it started (a file), then waits until cancelled."""
    (current_context().workspace / f"{label}.started").write_text(label)
    await asyncio.sleep(3600)
    return "never"


@tool(read_only=True)
async def pid() -> int:
    """The id of the process running the call."""
    return os.getpid()


@tool(read_only=True)
async def long_text(chars: int) -> str:
    """A result past the cap: previewed, and saved on the caller's side."""
    return "".join(chr(ord("a") + i % 26) for i in range(chars))


@tool(read_only=True)
async def steps(count: int) -> str:
    """Reports its progress `count` times, then answers."""
    for step in range(1, count + 1):
        report_progress(step, count, f"step {step} of {count}")
        await asyncio.sleep(0)
    return f"{count} steps"


@tool(read_only=True)
async def call_id_seen() -> str:
    """The call id the tool sees, as it was given (any value: a model's id may be a number)."""
    return repr(current_context().call_id)


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsQuantum(Tool):
    """Needs a resource no node of the test cluster has."""

    name = "needs_quantum"
    description = "Runs where a quantum chip is."
    ray_resources = {"quantum_chip": 1}
    timeout = 1.5

    async def execute(self, **kwargs: Any) -> str:
        return "ran"


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsQuantumNoLimit(NeedsQuantum):
    """The same, without a time limit of its own."""

    name = "needs_quantum_no_limit"
    timeout = None


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsHugeMemory(NeedsQuantum):
    """Asks for more memory than Ray's resource amounts can hold (past about 9.2e14: Ray
    keeps an amount as a 64-bit count of ten-thousandths): no node has that much."""

    name = "needs_huge_memory"
    ray_resources = {"memory": 10**15}


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsHugeSandbox(NeedsQuantum):
    """The same, of a custom resource the test cluster has one of."""

    name = "needs_huge_sandbox"
    ray_resources = {"sandbox": 10**15}


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsNanMemory(NeedsQuantum):
    """Asks for an amount that is not one: NaN bytes of memory."""

    name = "needs_nan_memory"
    ray_resources = {"memory": float("nan")}


@tool_parameters({"type": "object", "properties": {}, "additionalProperties": False})
class NeedsNegativeCpus(NeedsQuantum):
    """Asks for a negative number of CPUs."""

    name = "needs_negative_cpus"
    ray_resources = {"num_cpus": -1}


@tool(read_only=True)
async def chatty(chars: int) -> str:
    """Reports its progress with a message of `chars` characters, then answers."""
    report_progress(1, 2, "x" * chars)
    await asyncio.sleep(0)
    return "said"


@tool(read_only=True)
async def odd_numbers() -> str:
    """Reports progress with values no JSON number holds, then a plain one."""
    report_progress(float("nan"), 10, "nan done")
    report_progress(float("inf"), None, "inf done")
    report_progress(10**400, None, "huge done")
    report_progress(1, float("nan"), "nan total")
    report_progress(2, float("inf"), "inf total")
    report_progress(3, 10**400, "huge total")
    report_progress(4, 10, "plain")
    await asyncio.sleep(0)
    return "odd"


def build(ctx: ToolContext) -> list[Tool]:
    return [
        add, refuse, error_result, crash, malformed, too_slow, stubborn, read_secret,
        wait_forever, pid, long_text, steps, cancels_itself, unreadable_error, call_id_seen,
        locked_metadata, refuse_with_objects, exits_unreadably,
        chatty, odd_numbers, NeedsQuantum(), NeedsQuantumNoLimit(), NeedsHugeMemory(),
        NeedsHugeSandbox(), NeedsNanMemory(), NeedsNegativeCpus(),
    ]  # fmt: skip
