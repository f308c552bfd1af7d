"""The worker side: the Ray actor that builds the registry of a context from a
`ToolSource` (keeping those it used last), runs the prepared calls of a request on it
through the registry's own `run_prepared`, as a local run does, and streams back what
they report and answer."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from toolbridge.backends.ray.source import ToolSource
from toolbridge.backends.ray.wire import (
    ANSWER,
    CANCELLED,
    FAILED,
    PROGRESS,
    STARTING,
    UNSTARTED,
    Call,
    Context,
    Item,
    Request,
    pack_chunk,
    to_wire,
    unpack_message,
)
from toolbridge.core.registry import (
    Invocation,
    PreparedCall,
    ToolRegistry,
    text_of,
    timeout_error,
)
from toolbridge.core.tool import ToolResult
from toolbridge.core.work_start import AskedOnLoop
from toolbridge.execution.progress import (
    MAX_PENDING_PROGRESS,
    LoopSink,
    ToolProgress,
    set_progress_sink,
)

logger = logging.getLogger(__name__)

GO_TIMEOUT = 60.0
"""Seconds a worker waits for the caller's go to start a journaled call (the default of
`RayBackend`'s ``go_timeout``). A caller answers as soon as its journal has recorded the
start, seconds at worst (SQLite gives up waiting for a lock after 10 s): no answer by then
means the caller is gone (its event loop closed, the message lost), and the call, which
never started, is dropped so that its slot is not held for ever."""


class _Outbox:
    """What the calls of one request have to send back until the stream takes it: each
    call's progress (bounded by `MAX_PENDING_PROGRESS`), then its answer, in order."""

    def __init__(self) -> None:
        self.progress: dict[int, deque[tuple[float, float | None, str | None]]] = {}
        self.answers: dict[int, tuple[int, Any]] = {}
        self.starts: set[int] = set()  # calls that start, or wait for the caller's go
        self.answered: set[int] = set()  # every position that gave its outcome
        self.ready: dict[int, None] = {}  # positions with something to send, in order
        self.wake = asyncio.Event()

    def report(self, position: int, progress: ToolProgress) -> None:
        queued = self.progress.get(position)
        if queued is None:
            queued = self.progress[position] = deque(maxlen=MAX_PENDING_PROGRESS)
        queued.append((progress.progress, progress.total, progress.message))
        self.ready[position] = None
        self.wake.set()

    def answer(self, position: int, kind: int, payload: Any) -> None:
        """A call's outcome: its first stands (a second is a fault here, logged)."""
        if position in self.answered:
            logger.warning("call at position %d answered twice (kind %d): the first stands",
                           position, kind)  # fmt: skip
            return
        self.answered.add(position)
        self.answers[position] = (kind, payload)
        self.ready[position] = None
        self.wake.set()

    def starting(self, position: int) -> None:
        """A gated call is about to start (it has its slot, and a thread for a sync tool):
        ask the caller whether it may; any other the caller is told of: it starts now."""
        self.starts.add(position)
        self.ready[position] = None
        self.wake.set()

    async def take(self) -> list[Item]:
        """Everything ready, once something is: a call's start, then its progress, then
        its answer."""
        await self.wake.wait()
        self.wake.clear()
        chunk: list[Item] = []
        for position in self.ready:
            if position in self.starts:  # before its progress: the caller's events in order
                self.starts.discard(position)
                chunk.append((position, STARTING, None))
            queued = self.progress.pop(position, None)
            if queued:
                chunk.extend((position, PROGRESS, report) for report in queued)
            answer = self.answers.pop(position, None)
            if answer is not None:
                chunk.append((position, *answer))
        self.ready.clear()
        return chunk


class Worker:
    """The actor: builds the registry of a context once (keeping the `max_contexts` used
    last), runs requests of prepared calls on it, streaming back what they report and
    answer."""

    def __init__(
        self, source: ToolSource, max_calls: int, max_contexts: int, go_timeout: float
    ) -> None:
        self.source = source
        self.slots = asyncio.Semaphore(max_calls)  # calls running at once, whatever the requests
        self.max_contexts = max_contexts
        self.go_timeout = go_timeout  # how long a gated call waits for its caller's go
        self.registries: OrderedDict[tuple[str, str, str], ToolRegistry] = OrderedDict()
        self.running: dict[int, dict[int, asyncio.Task[None]]] = {}
        self.gates: dict[tuple[int, int], asyncio.Future[float | None]] = {}  # the caller's go
        self.loop: asyncio.AbstractEventLoop | None = None  # where requests run
        self.in_use: Counter[tuple[str, str, str]] = Counter()  # calls per context

    def ready(self) -> int:
        """The process id of this incarnation: answers once the actor is up."""
        return os.getpid()

    async def run(self, packed: bytes) -> AsyncIterator[bytes]:
        """Run every call of a request concurrently; yield chunks until each has answered
        (both packed: see `pack_chunk`)."""
        async for chunk in self._run(unpack_message(packed)):
            yield pack_chunk(chunk)

    async def answer(self, packed: bytes) -> bytes:
        """`run` in one reply, for a request with nothing to stream (one call, no progress):
        a plain actor call costs the caller less than a stream."""
        request = unpack_message(packed)
        return pack_chunk([item async for chunk in self._run(request) for item in chunk])

    async def _run(self, request: Request) -> AsyncIterator[list[Item]]:
        self.loop = asyncio.get_running_loop()
        outbox = _Outbox()
        tasks = {
            position: asyncio.create_task(
                self._one(request.batch, request.contexts[call.context], call, position, outbox)
            )
            for position, call in enumerate(request.calls)
        }
        self.running[request.batch] = tasks
        try:
            while len(outbox.answered) < len(tasks):
                yield await outbox.take()
            if outbox.ready:  # what came with the last answer (a call's fault, say)
                yield await outbox.take()
        finally:
            del self.running[request.batch]
            for task in tasks.values():
                task.cancel()

    # `cancel` and `go` come in the actor's own CONTROL group (its own thread and loop), so
    # that requests filling the worker cannot hold them up; they act on the requests' loop.

    async def cancel(self, batch: int, positions: list[int]) -> None:
        """Cancel calls of a running request (the caller stopped waiting for them), all in
        one turn of the loop: a call waiting for a slot never gets one another frees."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._cancel, batch, positions)

    async def go(self, batch: int, verdicts: dict[int, float | None]) -> None:
        """The caller's answer to gated calls of a request: start, given the seconds the
        caller took to record the start (not the call's: its budget gets them back), or
        never (None)."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._go_now, batch, verdicts)

    def _cancel(self, batch: int, positions: list[int]) -> None:
        tasks = self.running.get(batch, {})
        for position in positions:
            task = tasks.get(position)
            if task is not None:
                task.cancel()

    def _go_now(self, batch: int, verdicts: dict[int, float | None]) -> None:
        for position, verdict in verdicts.items():
            gate = self.gates.get((batch, position))
            if gate is not None and not gate.done():
                gate.set_result(verdict)

    def _registry(self, key: tuple[str, str, str], context: Context) -> ToolRegistry:
        """The registry of `context`, built on first use. Past `max_contexts`, the one used
        longest ago with no call running goes (a long-lived cluster serves many sessions);
        one with calls running stays, so a session never has two sets of tools here."""
        registry = self.registries.get(key)
        if registry is not None:
            self.registries.move_to_end(key)
            return registry
        registry = self.registries[key] = self.source.registry(context.tool_context())
        while len(self.registries) > self.max_contexts:
            idle = next((k for k in self.registries if k not in self.in_use), None)
            if idle is None:  # every one runs calls: kept until one is idle
                break
            del self.registries[idle]
        return registry

    async def _one(  # noqa: PLR0915 - a call's whole course on its worker, in one frame
        self, batch: int, context: Context, call: Call, position: int, outbox: _Outbox
    ) -> None:
        key = context.key
        self.in_use[key] += 1
        later: _Go | _OwnGate | None = None
        running = False  # its tool may have started (one that defers it: see `later`)
        try:
            registry = self._registry(key, context)
            tool = registry.get(call.name)
            if tool is None:
                missing = f"it has no tool {call.name!r}: its ToolSource builds other tools"
                outbox.answer(position, FAILED, missing + " than the caller's registry")
                return
            if call.progress:  # this task's own context: no reset needed (a sync tool's
                # thread reports through the loop: the outbox is the loop's)
                set_progress_sink(LoopSink(functools.partial(outbox.report, position)))
            budget = call.budget
            loop = asyncio.get_running_loop()
            began = loop.time()
            waits = call.gated or self.slots.locked()  # the wait is in the budget
            if not await self._slot(budget):
                outbox.answer(position, UNSTARTED, _timed_out(call))
                return
            try:
                go = _Go(self, batch, position, outbox, call) if call.gated else None
                # A tool that defers its start (a sync tool, waiting for one of this worker's
                # threads) starts when a thread starts its work: its go is asked then, or
                # the caller told (listeners only), and one stopped or timed out before
                # never starts (whoever watches it, if anyone); any other starts now.
                later = _asked_later(tool.defers_start, call, go, outbox, position)
                recording = 0.0  # the caller's time to record the start: not the call's
                if go is not None and later is None:
                    if not await go():
                        outbox.answer(position, *go.refusal())
                        return
                    recording = go.said or 0.0
                if budget is not None and waits:
                    budget -= loop.time() - began - recording  # what waiting for a slot left
                    if budget <= 0:
                        outbox.answer(position, UNSTARTED, _timed_out(call))
                        return
                if call.told and later is None:
                    outbox.starting(position)
                run = functools.partial(
                    registry.run_prepared, PreparedCall(call.name, tool, call.arguments, None),
                    call_id=call.call_id, time_limit=call.time_limit, budget=budget,
                    approved=True,
                )  # fmt: skip
                running = later is None
                invocation = await (run() if later is None else _asked_in_thread(run, later))
            finally:
                self.slots.release()
            answer = (ANSWER, to_wire(invocation)) if later is None else later.answer(invocation)
            outbox.answer(position, *answer)
        except asyncio.CancelledError:  # said: whether its tool may have started
            outbox.answer(position, CANCELLED, running or (later is not None and later.went))
            raise
        except BaseException as exc:  # building the tools failed, or a tool's SystemExit
            logger.exception("the worker failed on call %r (%s)", call.call_id, call.name)
            outbox.answer(position, FAILED, f"{type(exc).__name__}: {text_of(exc)}")
        finally:
            self.in_use[key] -= 1
            if not self.in_use[key]:
                del self.in_use[key]

    async def _slot(self, budget: float | None) -> bool:
        """Take a slot, waiting for one within `budget` on a full worker: whether one came."""
        if not self.slots.locked():
            await self.slots.acquire()  # free: no wait
            return True
        try:
            async with asyncio.timeout(budget):
                await self.slots.acquire()
        except TimeoutError:
            return False
        return True


class _Go:
    """The caller's go for a gated call (the journal records it running before it starts),
    asked once: when the call has its slot, or, for a tool that defers its start (a sync
    tool), when one of the worker's threads starts its work. The wait has a limit of its
    own (`go_timeout`): a caller that is gone would otherwise hold the slot for ever."""

    __slots__ = ("batch", "call", "dropped", "no", "outbox", "position", "said", "went", "worker")

    def __init__(
        self, worker: Worker, batch: int, position: int, outbox: _Outbox, call: Call
    ) -> None:
        self.worker, self.batch, self.position, self.outbox = worker, batch, position, outbox
        self.call = call
        self.said: float | None = None  # the caller's answer (see `Worker.go`)
        self.no = False  # the caller said no, or nothing in time: the call never starts
        self.dropped = False  # no answer within `go_timeout`
        self.went = False  # the call's work started (`AskedOnLoop` let its thread run it)

    def started(self) -> None:
        self.went = True

    async def __call__(self) -> bool:
        """Ask the caller whether the call may start: whether it said yes in time."""
        worker, key = self.worker, (self.batch, self.position)
        gate: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        worker.gates[key] = gate
        self.outbox.starting(self.position)
        try:
            async with asyncio.timeout(worker.go_timeout):
                self.said = await gate
        except TimeoutError:
            self.no = self.dropped = True
            logger.warning(
                "call %r (%s) had no go from its caller within %g s (go_timeout; is the "
                "caller gone?): dropped without starting, its slot freed",
                self.call.call_id, self.call.name, worker.go_timeout,
            )  # fmt: skip
            return False
        finally:
            del worker.gates[key]
        self.no = self.said is None
        return not self.no

    def answer(self, invocation: Invocation) -> tuple[int, Any]:
        """What a call whose go its thread asks for answers once its run ended: why it
        never started when it had no go; else its answer, marked as that of a call that
        never started (no thread of its runs on) when no thread started its work."""
        if self.no:
            return self.refusal()
        return ANSWER if self.went else UNSTARTED, to_wire(invocation)

    def refusal(self) -> tuple[int, Any]:
        """What a call that got no go answers: cancelled when its caller said no (it has
        answered the call), else why the worker dropped it."""
        if not self.dropped:
            return CANCELLED, False
        return FAILED, (
            f"it had no go to start the call from its caller within {self.worker.go_timeout:g} "
            "s (RayBackend's go_timeout), so it dropped the call, which never started"
        )


class _OwnGate:
    """The worker's own gate on a call of a tool that defers its start (a sync tool) whose
    caller gives no go (no journal): it starts when one of the worker's threads starts its
    work, and a caller that listens (`outbox`) hears it then, as a local call's listeners
    do. A call stopped, or whose limit ended, before that never starts: it is dropped here
    and answers as one that never started (its text says so), so its worker, where
    nothing of it runs, is spared. Local to the worker: no message to the caller."""

    __slots__ = ("outbox", "position", "went")

    def __init__(self, outbox: _Outbox | None, position: int) -> None:
        self.outbox, self.position = outbox, position
        self.went = False

    def started(self) -> None:
        if not self.went:  # once: the thread's word and the run's end may both say it
            self.went = True
            if self.outbox is not None:
                self.outbox.starting(self.position)

    def answer(self, invocation: Invocation) -> tuple[int, Any]:
        return ANSWER if self.went else UNSTARTED, to_wire(invocation)


def _asked_later(
    defers: bool, call: Call, go: _Go | None, outbox: _Outbox, position: int
) -> _Go | _OwnGate | None:
    """The gate of a call whose tool `defers` its start, which a thread passes as it starts
    the call's work: its go (journaled), else the worker's own (the caller told of the
    start if it listens); None: the tool starts at once."""
    if not defers:
        return None
    return go if go is not None else _OwnGate(outbox if call.told else None, position)


async def _asked_in_thread(
    run: Callable[[], Awaitable[Invocation]], later: _Go | _OwnGate
) -> Invocation:
    """`run` a call whose tool defers its start (a sync tool): its go is asked (or, for a
    caller that only listens, its start said) by the worker thread that starts its work
    (the same `WorkStart` as locally), so a call waiting for a thread is still queued in
    its caller's journal, and not yet started for its listeners; stopped or timed out
    before that, it never starts."""
    ask = later if isinstance(later, _Go) else None  # no journal: no wait
    work = AskedOnLoop(asyncio.get_running_loop(), ask, later.started)
    try:
        with work:
            return await run()
    finally:
        if work.going is not None:  # its run ended: a go still awaited is not needed
            work.going.cancel()


def _timed_out(call: Call) -> tuple[Any, ...]:
    """A call whose budget ran out before its tool started: the limit's text for a call
    that never started, as a local call waiting for a worker thread gets."""
    assert call.time_limit is not None
    error = timeout_error(call.name, call.time_limit, started=False)
    return to_wire(Invocation(ToolResult.error(error), None, error, TimeoutError()))
