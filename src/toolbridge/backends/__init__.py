"""Execution backends: where a prepared call runs. Everything before and after stays put.

The executor prepares, screens, schedules and shapes results on the caller's side; a
backend only runs a call that was already prepared and approved, and answers with the
same `Invocation` the registry would. `LocalBackend` (the default) runs it in this
process; `toolbridge.backends.ray.RayBackend` runs it on a Ray cluster.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Protocol

from toolbridge.registry import Invocation, PreparedCall, ToolRegistry

__all__ = ["CallRunner", "ExecutionBackend", "LocalBackend"]


class CallRunner(Protocol):
    """Runs one prepared, approved call of a bound registry (`ToolRegistry.run_prepared`)."""

    def __call__(
        self, prepared: PreparedCall, *, call_id: str | None = None, time_limit: float | None
    ) -> Awaitable[Invocation]: ...


class ExecutionBackend(Protocol):
    """A place to run calls; `bind` ties it to the registry (and context) of one executor."""

    def bind(self, registry: ToolRegistry) -> CallRunner: ...


class LocalBackend:
    """Runs calls in this process, on the event loop: the registry's own `run_prepared`,
    for calls the executor has already approved."""

    def bind(self, registry: ToolRegistry) -> CallRunner:
        return functools.partial(registry.run_prepared, approved=True)
