"""A call on the caller's side, from the moment it reaches the backend to its answer, the
request it went out in, and whether it may go to another worker when its worker died."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from toolbridge.backends import StartHook
from toolbridge.backends.ray.pool import Pool
from toolbridge.backends.ray.wire import Context
from toolbridge.core.registry import Invocation
from toolbridge.core.tool import Tool
from toolbridge.execution.progress import ProgressSink


@dataclass(slots=True, eq=False)
class Pending:
    """A call on the caller's side, from the moment it reaches the backend to its answer."""

    tool: Tool
    pool: Pool
    context: Context
    arguments: dict[str, Any]
    call_id: str | None  # as the caller gave it (any value a local run would pass)
    time_limit: float | None
    deadline: float  # loop time: the end of its limit, or of the wait for a worker
    sink: ProgressSink | None
    future: asyncio.Future[Invocation]
    retryable: bool
    on_start: StartHook | None = None  # the executor's: told of the start (gated: asked)
    started: bool = False  # told to start (it may have): no longer safe to send elsewhere
    tries: int = 0
    stream: Stream | None = None  # where it runs (None: waiting for a worker)
    position: int = 0
    answered: bool = False
    reported: bool = False  # its worker gave its outcome (a second one is a fault: ignored)
    dropped: bool = False  # stopped on its worker, which says its tool never started
    timer: asyncio.TimerHandle | None = None
    waiter: asyncio.Future[None] | None = None  # set by a caller waiting for it to stop


@dataclass(slots=True, eq=False)
class Stream:
    """One request on one actor, and the calls it carries (by position)."""

    pool: Pool
    index: int
    batch: int
    calls: list[Pending]

    @property
    def actor(self) -> Any:
        return self.pool.actors[self.index]


def may_retry(call: Pending) -> bool:
    """Whether a call of a dead worker may go to another: its tool is safe to run again,
    or it never started."""
    return call.retryable or never_started(call)


def never_started(call: Pending) -> bool:
    """Whether the call surely never started on its worker: its worker says so (it was
    stopped before), or it is gated and its go was never sent (the journal heard of no
    start)."""
    if call.dropped:
        return True
    return call.on_start is not None and call.on_start.gated and not call.started
