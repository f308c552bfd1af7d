"""When the work of a tool that waits for a worker really starts.

A sync function tool runs in a worker thread; with more calls than threads, a call waits
in the pool's queue after its `execute` began. Such a tool says so (`Tool.defers_start`)
and, from where its work runs, asks the call's `WorkStart` just before the work starts:
the executor installs one for the call when someone listens (a journal, event
listeners): the call is marked running, and `call_started` comes, only then, so one that
never left the queue is not taken for one that may have partly run, and one whose run
ended first (stopped, timed out) never starts.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Protocol

__all__ = [
    "WorkNotStarted",
    "WorkStart",
    "current_work_start",
    "reset_work_start",
    "set_work_start",
]


class WorkStart(Protocol):
    """The executor's side of the start of a call's work."""

    def enter(self) -> bool:
        """Called where the work runs (a worker thread), just before it starts: whether it
        may start. Blocks until the call's start is recorded; False when the call was
        stopped meanwhile or its start could not be recorded (the work must not run)."""
        ...

    def stop(self) -> bool:
        """Called where the call runs (the event loop) when its run ends (done, stopped,
        timed out): from now on the work may no longer start. Whether it started."""
        ...


class WorkNotStarted(Exception):
    """The work did not start: its call was stopped, or its start could not be recorded."""


_work_start: ContextVar[WorkStart | None] = ContextVar("toolbridge_work_start", default=None)


def current_work_start() -> WorkStart | None:
    """The `WorkStart` of the call running in this context (None: nobody needs to know)."""
    return _work_start.get()


def set_work_start(start: WorkStart) -> Token[WorkStart | None]:
    """Install `start` for the call run in this context; undo with `reset_work_start`."""
    return _work_start.set(start)


def reset_work_start(token: Token[WorkStart | None]) -> None:
    _work_start.reset(token)
