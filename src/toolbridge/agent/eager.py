"""Eager tools: the leading concurrency-safe calls of a turn start while the model is
still streaming the rest of it (``AgentRunner(eager_tools=True)``).

Each early call posts its end to the same queue as the model's events, so its
`ToolFinished` is reported as it happens, between the model's events; what the early
calls left running when the turn ended is awaited (or expired at the run's deadline,
or cancelled when the run stops) by the turn's calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from toolbridge.agent.events import (
    AgentEvent,
    ModelResponse,
    ToolCallReady,
    ToolFinished,
    ToolStarted,
)
from toolbridge.agent.run_context import RunContext
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.registry import ToolRegistry
from toolbridge.execution.outcomes import Outcomes, ToolOutcome

__all__ = ["EarlyCalls"]


@dataclass(frozen=True, slots=True)
class _Ended:
    """Posted when an early call's task is done."""

    call_id: str


@dataclass(frozen=True, slots=True)
class _Pumped:
    """Posted when the model's turn was read to its end (or failed)."""

    task: asyncio.Task[None]


class EarlyCalls:
    """The leading concurrency-safe calls of a turn, started while the model streams.

    Only an unbroken prefix starts early: once a call that is not concurrency-safe
    arrives, the rest wait for the end of the turn, keeping the executor's order. Each
    call posts its end to one queue with the model's events (`merge`), so its
    `ToolFinished` is reported as it happens, in whatever order the calls finish.
    """

    def __init__(self, registry: ToolRegistry, run: RunContext) -> None:
        self._registry = registry
        self._run = run
        self._open = True
        self._tasks: dict[str, asyncio.Task[list[ToolOutcome]]] = {}
        self._into: dict[str, Outcomes] = {}  # each call's outcomes, kept when cancelled
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.outcomes: dict[str, ToolOutcome] = {}
        """The outcomes reported so far (their `ToolFinished` was yielded)."""

    def offer(self, call: ToolCallRequest) -> bool:
        """Start `call` now if it may; True when it started."""
        tool = self._registry.get(call.name) if isinstance(call.name, str) else None
        if not self._open or tool is None or not tool.concurrency_safe or call.id in self._tasks:
            self._open = False
            return False
        into = self._into[call.id] = Outcomes()
        task = asyncio.create_task(self._run.execute([call], into))
        ended = _Ended(call.id)
        task.add_done_callback(lambda _: self._queue.put_nowait(ended))
        self._tasks[call.id] = task
        return True

    async def _expire(self, turn: int) -> list[ToolFinished]:
        """The run's deadline passed: cancel the calls still running; their `cancelled`
        outcomes join `outcomes`, so they are answered and never started again."""
        running = [task for task in self._tasks.values() if not task.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        expired = []
        for call_id, task in self._tasks.items():
            held = self._into[call_id]
            if call_id not in self.outcomes and task.cancelled() and held:
                self.outcomes[call_id] = held[0]
                expired.append(ToolFinished(held[0], turn))
        return expired

    def _report(self, ended: _Ended, turn: int) -> ToolFinished | None:
        task = self._tasks.get(ended.call_id)
        if task is None or task.cancelled() or ended.call_id in self.outcomes:
            return None
        outcome = task.result()[0]
        self.outcomes[ended.call_id] = outcome
        return ToolFinished(outcome, turn)

    async def merge(
        self, events: AsyncGenerator[Any, None], turn: int
    ) -> AsyncGenerator[Any, None]:
        """The model's turn `events`, with each early call's `ToolFinished` as it comes.

        One task reads the model's stream to its end (an SDK's stream stays within one
        task), posting into the queue the calls' ends go to. Closing this generator
        stops that task and closes the stream; the model's error is raised here.
        """
        pump = asyncio.create_task(_pump(events, self._queue))
        pump.add_done_callback(lambda task: self._queue.put_nowait(_Pumped(task)))
        try:
            while True:
                item = await self._queue.get()
                if isinstance(item, _Pumped):
                    item.task.result()  # the model's error, if any
                    return
                if isinstance(item, _Ended):
                    finished = self._report(item, turn)
                    if finished is not None:
                        yield finished
                    continue
                yield item
        finally:
            if not pump.done():
                pump.cancel()
                await asyncio.wait([pump])

    async def finished(self, turn: int) -> AsyncGenerator[ToolFinished, None]:
        """The `ToolFinished` of the calls not reported yet, as each one ends; at the
        run's deadline, those of the calls it cancelled."""
        while any(
            call_id not in self.outcomes and not task.cancelled()
            for call_id, task in self._tasks.items()
        ):
            left = self._run.remaining()
            try:
                if left is None:
                    item = await self._queue.get()
                else:
                    item = await asyncio.wait_for(self._queue.get(), max(left, 0))
            except TimeoutError:
                for expired in await self._expire(turn):
                    yield expired
                return
            if isinstance(item, _Ended):
                finished = self._report(item, turn)
                if finished is not None:
                    yield finished

    async def during(
        self,
        source: AsyncGenerator[AgentEvent | ModelResponse | None, None],
        turn: int,
    ) -> AsyncGenerator[AgentEvent | ModelResponse | None, None]:
        """The model's turn with `eager_tools`: each call that may start early starts as it
        arrives (`ToolStarted` right after its `ToolCallReady`), and each early call's
        `ToolFinished` comes as it ends, between the model's events. Closing this (the run
        stopped mid-turn) cancels the early calls."""
        try:
            async with aclosing(self.merge(source, turn)) as events:
                async for event in events:
                    yield event
                    if isinstance(event, ToolCallReady) and self.offer(event.call):
                        yield ToolStarted(event.call, turn)
        except BaseException:
            await self.cancel()
            raise

    async def cancel(self) -> dict[str, ToolOutcome]:
        """Cancel the calls still running; the outcomes of those that had finished."""
        for task in self._tasks.values():
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        done = {
            call_id: task.result()[0]
            for call_id, task in self._tasks.items()
            if not task.cancelled() and task.exception() is None
        }
        self._tasks = {}
        return done


async def _pump(events: AsyncGenerator[Any, None], queue: asyncio.Queue[Any]) -> None:
    async with aclosing(events):
        async for event in events:
            queue.put_nowait(event)
