"""When the work of a tool that waits for a worker really starts.

A sync function tool runs in a worker thread; with more calls than threads, a call waits
in the pool's queue after its `execute` began. Such a tool says so (`Tool.defers_start`)
and, from where its work runs, asks the call's `WorkStart` just before the work starts:
the executor installs one for the call when a journal records it (and a Ray worker, for
a call whose caller journals it): the call is marked running only then, so one that never
left the queue is not taken for one that may have partly run. `AskedOnLoop` is the one
implementation: the answer is decided on an event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from typing import Protocol

__all__ = [
    "AskedOnLoop",
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


class AskedOnLoop:
    """A `WorkStart` whose answer is decided on `loop`: asked in the work's thread, it runs
    `ask` there (it records the start, or asks whoever does: True lets the work start),
    then `started` (the work starts now) only if the answer is still yes. Used as a context
    manager around the call's run: installed for it, and stopped when it ends. Every
    answer is given on the loop, once: no once `stop` was called (the call's run ended: stopped,
    timed out; the thread is let go at once, and work let go of as never started cannot
    start after all), no if `ask` says no or fails, else yes."""

    __slots__ = ("answer", "ask", "decided", "going", "loop", "started", "token")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ask: Callable[[], Awaitable[bool]],
        started: Callable[[], None] = lambda: None,
    ) -> None:
        self.loop, self.ask, self.started = loop, ask, started
        self.answer = False
        self.decided = threading.Event()
        self.going: asyncio.Task[None] | None = None  # `_go`, kept from the collector
        self.token: Token[WorkStart | None] | None = None

    def __enter__(self) -> AskedOnLoop:
        """Install this for the call run in this context (`with`: see `stop`)."""
        self.token = set_work_start(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()  # from now on its work may no longer start
        assert self.token is not None
        reset_work_start(self.token)

    def enter(self) -> bool:
        try:
            self.loop.call_soon_threadsafe(self._ask)
        except RuntimeError:  # the loop is closed: its run is over
            return False
        self.decided.wait()
        return self.answer

    def stop(self) -> None:
        """The call's run ended: from now on its work may no longer start."""
        self._decide(False)

    def _ask(self) -> None:
        if not self.decided.is_set():
            self.going = self.loop.create_task(self._go())

    async def _go(self) -> None:
        answer = False
        try:
            if self.decided.is_set():  # stopped before this step: nothing to ask
                return
            if await self.ask():
                answer = not self.decided.is_set()  # (stopped meanwhile: no)
                if answer:
                    self.started()
        finally:  # even when this is cancelled or fails: the thread waits for an answer
            self._decide(answer)

    def _decide(self, answer: bool) -> None:
        if not self.decided.is_set():
            self.answer = answer
            self.decided.set()


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
