"""Batch scheduling: what of a batch runs together, what in order, and what alone.

`ToolBatch` is one batch in flight. `run_batch` plans it into runs (consecutive
concurrency-safe calls together, other calls one after another, an ``exclusive`` call
alone) and runs them in order, each under the `ExclusiveGate` once: a fair
shared/exclusive lock on one event loop whose uncontended path never awaits. A stop
(`CancelledError`, `KeyboardInterrupt`, `SystemExit`) still leaves every call with an
outcome and none running; what happens to one call is `call_path`'s job.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import reprlib
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.registry import PreparedCall
from toolbridge.core.tool import ToolResult, reset_call_owner, set_call_owner
from toolbridge.execution.event_buffer import EventBuffer
from toolbridge.execution.outcomes import (
    Outcomes,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
    failed_outcome,
    finished_event,
)

__all__ = [
    "BatchCalls",
    "BatchOwner",
    "EventListener",
    "ExclusiveGate",
    "Stopped",
    "Together",
    "ToolBatch",
    "duplicate_id_error",
    "emit",
    "invalid_id_error",
    "run_batch",
]

logger = logging.getLogger(__name__)

EventListener = Callable[[ToolEvent], None]


def emit(listeners: list[EventListener], event: ToolEvent) -> None:
    """Give `event` to every listener; a failing listener is logged, the others still run."""
    for listener in listeners:
        try:
            listener(event)
        except Exception:
            logger.exception("tool event listener %r failed", listener)


class ExclusiveGate:
    """Exclusive holders wait for every shared holder to leave and block new ones.

    The executor takes it once per run of calls, not per call.
    """

    def __init__(self) -> None:
        self._shared = 0
        self._exclusive = False
        self._waiters: deque[tuple[bool, asyncio.Future[None]]] = deque()

    def try_enter(self, exclusive: bool) -> bool:
        """Enter without waiting if nobody waits and the gate is free; the fast path."""
        if not self._waiters and self._free_for(exclusive):
            self._enter(exclusive)
            return True
        return False

    async def acquire(self, exclusive: bool) -> None:
        if self.try_enter(exclusive):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((exclusive, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(exclusive)  # admitted just as we were cancelled
            else:
                self._waiters.remove((exclusive, waiter))
            raise

    def release(self, exclusive: bool) -> None:
        if exclusive:
            self._exclusive = False
        else:
            self._shared -= 1
        while self._waiters:
            exclusive_waiter, waiter = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
                continue
            if not self._free_for(exclusive_waiter):
                break
            self._waiters.popleft()
            self._enter(exclusive_waiter)
            waiter.set_result(None)

    def _free_for(self, exclusive: bool) -> bool:
        return not self._exclusive and (not exclusive or self._shared == 0)

    def _enter(self, exclusive: bool) -> None:
        if exclusive:
            self._exclusive = True
        else:
            self._shared += 1


class Stopped(Exception):
    """Carries a `KeyboardInterrupt`/`SystemExit` from a call up to its batch, so that the
    batch stops the other calls of its group before the exception goes on."""

    def __init__(self, reason: BaseException) -> None:
        super().__init__(repr(reason))
        self.reason = reason


class BatchOwner(Protocol):
    """The executor a `ToolBatch` belongs to (a `ToolExecutor`), as the batch uses it."""

    async def _run_batch(self, batch: ToolBatch) -> None: ...


class BatchCalls(Protocol):
    """The per-call side `run_batch` drives (`call_path.CallPath`)."""

    def admit(self, call: ToolCallRequest) -> PreparedCall | ToolOutcome: ...

    async def execute(self, batch: ToolBatch, index: int, prepared: PreparedCall) -> None: ...

    async def execute_together(
        self, batch: ToolBatch, run: list[tuple[int, PreparedCall]]
    ) -> None: ...

    async def refuse(
        self, batch: ToolBatch, index: int, outcome: ToolOutcome, arguments: Any
    ) -> None: ...


@dataclass(slots=True)
class ToolBatch:
    """One batch in flight. `outcomes` fills as calls finish; after a cancel it is complete.

    Calls that had not finished when the batch was cancelled get a `CANCELLED` outcome,
    so every call id can still be answered.
    """

    executor: BatchOwner
    calls: list[ToolCallRequest]
    listeners: list[EventListener]
    outcomes: list[ToolOutcome | None] = field(init=False)
    fatal: ToolOutcome | None = None
    fatal_index: int = field(default=sys.maxsize, init=False)
    _clock: tuple[float, float] = field(init=False)

    def __post_init__(self) -> None:
        self.outcomes = [None] * len(self.calls)
        self._clock = (time.time(), time.perf_counter())

    def wall_clock(self, perf_counter: float) -> float:
        """The wall-clock time of a `time.perf_counter()` reading taken during this batch."""
        wall, perf = self._clock
        return wall + (perf_counter - perf)

    @property
    def finished(self) -> list[ToolOutcome]:
        return [outcome for outcome in self.outcomes if outcome is not None]

    async def run(self, *, into: Outcomes | None = None) -> Outcomes:
        """Run every call; return the outcomes in call order (`into`, when given).

        If the run is stopped (`CancelledError`, `KeyboardInterrupt`, `SystemExit`),
        every call still gets an outcome - unfinished ones `CANCELLED` - in `into`
        (and `outcomes`) before the exception propagates; no call is left running.
        """
        out = Outcomes() if into is None else into
        owner = set_call_owner(self.executor)  # what its calls leave running is its to end
        try:
            await self.executor._run_batch(self)
        except Stopped as stop:
            self._cancel_rest()
            out[:] = self.finished
            raise stop.reason from None
        except asyncio.CancelledError:
            self._cancel_rest()
            out[:] = self.finished
            raise
        finally:
            reset_call_owner(owner)
        out[:] = self.finished
        return out

    async def stream(self) -> AsyncIterator[ToolEvent]:
        """Run the batch, yielding events as calls start, report progress and finish (of
        a call's progress, the latest `MAX_PENDING_PROGRESS` reports not yet read: see
        `EventBuffer`)."""
        events = EventBuffer()
        self.listeners = [*self.listeners, events.put]
        task = asyncio.create_task(self.run())
        task.add_done_callback(lambda _: events.end())
        try:
            while (event := await events.get()) is not None:
                yield event
            await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait([task])

    def _cancel_rest(self) -> None:
        error = ToolError(
            ErrorKind.CANCELLED,
            "the call was cancelled before it finished (the run was stopped).",
            "It may have partly run: check its effects before calling it again.",
        )
        now = time.time()
        for index, outcome in enumerate(self.outcomes):
            if outcome is None:
                cancelled = ToolOutcome(
                    self.calls[index],
                    OutcomeStatus.CANCELLED,
                    ToolResult.error(error),
                    error,
                    started_at=now,
                )
                self.outcomes[index] = cancelled
                if self.listeners:
                    emit(self.listeners, finished_event(cancelled))


class _Mode(enum.Enum):
    TOGETHER = "together"
    IN_ORDER = "in_order"
    EXCLUSIVE = "exclusive"


async def run_batch(
    batch: ToolBatch, calls: BatchCalls, gate: ExclusiveGate, *, concurrency: bool
) -> None:
    """Plan the batch into runs, then run them in order, each under the gate once.

    A run is consecutive concurrency-safe calls (run together), consecutive other
    calls (one after another), or one exclusive call (alone in the executor).
    """
    runs: list[tuple[_Mode, list[tuple[int, PreparedCall]]]] = []
    first_of: dict[str, int] = {}  # call id -> index of the call that has it
    for index, call in enumerate(batch.calls):
        try:
            first = first_of.setdefault(call.id, index)
        except TypeError:  # a list or an object from a hostile payload: no id at all
            error = invalid_id_error(call.id)
            await calls.refuse(batch, index, failed_outcome(call, error, ()), call.arguments)
            continue
        if first != index:  # its result could be taken for the other's: never run
            error = duplicate_id_error(call.id, first, batch.calls[first].name)
            await calls.refuse(batch, index, failed_outcome(call, error, ()), call.arguments)
            continue
        prepared = calls.admit(call)
        if isinstance(prepared, ToolOutcome):
            await calls.refuse(batch, index, prepared, call.arguments)
            continue
        tool = prepared.tool
        assert tool is not None
        if tool.exclusive:
            mode = _Mode.EXCLUSIVE
        elif concurrency and tool.concurrency_safe:
            mode = _Mode.TOGETHER
        else:
            mode = _Mode.IN_ORDER
        if runs and runs[-1][0] is mode and mode is not _Mode.EXCLUSIVE:
            runs[-1][1].append((index, prepared))
        else:
            runs.append((mode, [(index, prepared)]))
    for mode, run in runs:
        if batch.fatal_index < run[0][0]:
            await _skip(batch, calls, run)
            continue
        exclusive = mode is _Mode.EXCLUSIVE
        if not gate.try_enter(exclusive):
            await gate.acquire(exclusive)
        try:
            if mode is _Mode.TOGETHER and len(run) > 1:
                await calls.execute_together(batch, run)
                continue
            for position, (index, prepared) in enumerate(run):
                if batch.fatal_index < index:
                    await _skip(batch, calls, run[position:])
                    break
                await calls.execute(batch, index, prepared)
        finally:
            gate.release(exclusive)


async def _skip(batch: ToolBatch, calls: BatchCalls, group: list[tuple[int, PreparedCall]]) -> None:
    error = ToolError(
        ErrorKind.CANCELLED,
        "not run: an earlier call in this batch failed, and this run stops at the first "
        "tool error.",
    )
    for index, prepared in group:
        outcome = ToolOutcome(
            batch.calls[index],
            OutcomeStatus.SKIPPED,
            ToolResult.error(error),
            error,
            repairs=prepared.repairs,
            started_at=time.time(),
        )
        await calls.refuse(batch, index, outcome, prepared.arguments)  # it never ran


class Together:
    """Calls run concurrently, started as they come (`start`), then waited for (`wait`).
    If one stops the run, or the caller is stopped, the others are cancelled and waited
    for before the stop goes on (`stop`): no call is left running."""

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, calls: Iterable[Coroutine[Any, Any, None]]) -> None:
        loop = asyncio.get_running_loop()
        self._tasks += [loop.create_task(call) for call in calls]

    async def wait(self) -> None:
        """Wait for every call started; `stop` the others when one stops the run."""
        try:
            await asyncio.gather(*self._tasks)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Cancel the calls still running and wait for them (every exception retrieved:
        none is reported as lost)."""
        running = [task for task in self._tasks if not task.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        for task in self._tasks:
            if task.done() and not task.cancelled():
                task.exception()


def invalid_id_error(call_id: object) -> ToolError:
    """The error of a call whose id is not text (a list or an object): no result could be
    matched to it, so it is refused rather than run. It is shown shortened (a hostile id
    may be huge, or nested as deep as JSON allows)."""
    return ToolError(
        ErrorKind.INVALID_ARGUMENTS,
        f"not run: invalid call id {reprlib.repr(call_id)}: it is not text (a "
        f"{type(call_id).__name__}), "
        "and a result is matched to its call by the id",
        "Send this call again with a unique text id.",
    )


def duplicate_id_error(call_id: str, first: int, first_name: str) -> ToolError:
    """The error of a call whose id an earlier call of its batch (or turn) already has:
    results are matched to calls by id, so it is refused rather than run."""
    return ToolError(
        ErrorKind.INVALID_ARGUMENTS,
        f"not run: the call id {call_id!r} is already used by call {first + 1} "
        f"({first_name!r}) of this batch; every call needs an id of its own, so that each "
        "result answers the right call",
        "Send this call again with a new, unique id.",
    )
