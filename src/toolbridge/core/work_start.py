"""When the work of a tool that waits for a worker really starts.

A sync function tool runs in a worker thread; with more calls than threads, a call waits
in the pool's queue after its `execute` began. Such a tool says so (`Tool.defers_start`)
and, from where its work runs, asks the call's `WorkStart` just before the work starts.
The executor installs one for the call when someone listens (a journal, event listeners),
a Ray worker for every such call (its caller journals it, only listens, or neither), and
`run_prepared` one of its own for a call with a time limit that nobody else watches: the
call is marked running, and `call_started` comes, only then, so one that never left the
queue is not taken for one that may have partly run (its timeout says it never started),
and one whose run ended first (stopped, timed out) never starts. `AskedOnLoop` is the
one implementation: the answer is decided on an event loop. A `WorkStart` is its call's only:
asking it takes it out of the work's context, so calls the work makes itself (an executor
driven in an `asyncio.run` of its own, which inherits that context) never find it.
"""

from __future__ import annotations

import asyncio
import contextlib
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
        stopped meanwhile or its start could not be recorded (the work must not run).
        The context it is called in (the work's: a worker thread's copy) no longer has it
        (`current_work_start`): it is this call's, so calls the work makes (an executor of
        its own, in an `asyncio.run` of its own) never ask or stop it."""
        ...

    def stop(self) -> bool:
        """Called where the call runs (the event loop) when its run ends (done, stopped,
        timed out): from now on the work may no longer start. Whether it started."""
        ...


def _nothing() -> None:
    pass


class AskedOnLoop:
    """A `WorkStart` decided on `loop`, once: no once the call's run ended (`stop`:
    stopped, timed out; work let go of as never started cannot start after all), else
    yes, and `started` is said (on the loop, before the run's end is).

    With an `ask` (the journal must record the start, or a caller must give its go), the
    thread has the loop run it and waits: True lets the work start; no if it says no or
    fails. A loop that no longer runs (closed, or stopped and left) answers nothing, so
    the thread gives up then: the work does not start. Without one (only listeners hear
    of the start) the thread waits for nothing: it takes the answer itself and tells the
    loop. Used as a context manager around the call's run: installed for it, stopped when
    it ends."""

    __slots__ = ("answer", "ask", "given", "going", "lock", "loop", "started", "token")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ask: Callable[[], Awaitable[bool]] | None,
        started: Callable[[], None] = _nothing,
    ) -> None:
        self.loop, self.ask, self.started = loop, ask, started
        self.answer: bool | None = None  # None: not given yet
        self.lock = threading.Lock()  # the thread and the loop may give it at once
        self.given = threading.Event() if ask is not None else None  # what a thread waits on
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
        _work_start.set(None)  # the work's own context: nothing it runs takes this for its own
        given, loop = self.given, self.loop
        if given is None:  # nothing to ask: it starts unless its run ended
            if not self._decide(True):
                return False
            if self.started is not _nothing:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody left to hear
                    loop.call_soon_threadsafe(self.started)
            return True
        try:
            loop.call_soon_threadsafe(self._ask)
        except RuntimeError:  # the loop is closed: its run is over
            return False
        while not given.wait(_LOOP_LOOK):
            if loop.is_closed() or not loop.is_running():  # left: nobody will answer
                return self._decide(False)
        return self.answer is True

    def stop(self) -> bool:
        if self._decide(False):  # it started: said before its outcome, whatever came first
            self.started()
            return True
        return False

    def _ask(self) -> None:
        if self.answer is None:
            self.going = self.loop.create_task(self._go())

    async def _go(self) -> None:
        assert self.ask is not None
        try:  # stopped before this step: nothing to ask; stopped meanwhile: no
            if self.answer is None and await self.ask() and self._decide(True):
                self.started()
        finally:  # even when this is cancelled or fails: the thread waits for an answer
            self._decide(False)

    def _decide(self, answer: bool) -> bool:
        """Give `answer` unless one was given: the answer."""
        with self.lock:
            if self.answer is None:
                self.answer = answer
                if self.given is not None:
                    self.given.set()
            return self.answer


_LOOP_LOOK = 0.25
"""Seconds between a waiting thread's looks at whether its loop still runs."""


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
