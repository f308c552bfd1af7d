"""Execution backends: where a prepared call runs. Everything before and after stays put.

The executor prepares, screens, schedules and shapes results on the caller's side; a
backend only runs a call that was already prepared and approved, and answers with the
same `Invocation` the registry would. `LocalBackend` (the default) runs it in this
process; `toolbridge.backends.ray.RayBackend` runs it on a Ray cluster.

A backend whose calls may wait after they are handed over (for a worker, or a slot on
one) says so with ``defers_start = True``: the executor then passes `on_start` (a
`StartHook`), which the backend awaits just before the tool starts and tells when it
starts, so the call journal records a call as running, and the `call_started` event comes,
only once its tool really starts.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Protocol

from toolbridge.core.errors import ToolError
from toolbridge.core.registry import Invocation, PreparedCall, ToolRegistry

__all__ = ["CallRunner", "ExecutionBackend", "LocalBackend", "StartHook"]


class StartHook(Protocol):
    """The executor's side of a call's start, given as `on_start` to a backend that
    `defers_start` (only when someone listens: a journal, or event listeners).

    When `gated`, the backend awaits the hook once the call has its place (a worker's
    slot, and its thread for a sync tool), just before its tool starts, and starts it
    only on None (the journal records the call running first); a `ToolError` means: do
    not start it (the executor answers the call with that error). The backend calls
    `started()` when the tool starts (for a gated call: as its go is sent, the point from
    which it may run); a call the backend was stopped from starting before then is let
    go of, not found interrupted."""

    @property
    def gated(self) -> bool: ...

    def __call__(self) -> Awaitable[ToolError | None]: ...

    def started(self) -> None: ...


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
