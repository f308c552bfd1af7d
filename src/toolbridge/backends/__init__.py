"""Execution backends: where a prepared call runs. Everything before and after stays put.

The executor prepares, screens, schedules and shapes results on the caller's side; a
backend only runs a call that was already prepared and approved, and answers with the
same `Invocation` the registry would. `LocalBackend` (the default) runs it in this
process; `toolbridge.backends.ray.RayBackend` runs it on a Ray cluster.

A backend whose calls may wait after they are handed over (for a worker, or a slot on
one) says so with ``defers_start = True``: the executor then passes `on_start`, which the
backend awaits just before the tool starts, so the call journal records a call as running
only once its tool really starts.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Protocol

from toolbridge.core.errors import ToolError
from toolbridge.core.registry import Invocation, PreparedCall, ToolRegistry

__all__ = ["CallRunner", "ExecutionBackend", "LocalBackend", "StartHook"]

StartHook = Callable[[], Awaitable[ToolError | None]]
"""Awaited by a backend that `defers_start` just before the call's tool starts; a
`ToolError` means: do not start it (the executor answers the call with that error)."""


class CallRunner(Protocol):
    """Runs one prepared, approved call of a bound registry (`ToolRegistry.run_prepared`).
    `on_start` is passed only to the runner of a backend that `defers_start`."""

    def __call__(
        self,
        prepared: PreparedCall,
        *,
        call_id: str | None = None,
        time_limit: float | None,
        on_start: StartHook | None = None,
    ) -> Awaitable[Invocation]: ...


class ExecutionBackend(Protocol):
    """A place to run calls; `bind` ties it to the registry (and context) of one executor."""

    def bind(self, registry: ToolRegistry) -> CallRunner: ...


class LocalBackend:
    """Runs calls in this process, on the event loop: the registry's own `run_prepared`,
    for calls the executor has already approved. A call starts when it is handed over."""

    defers_start = False

    def bind(self, registry: ToolRegistry) -> CallRunner:
        return functools.partial(registry.run_prepared, approved=True)
