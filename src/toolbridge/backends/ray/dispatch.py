"""The caller's side on one event loop: calls wait for a worker of their pool and go out
in one request per actor each time the loop comes round; each is settled by what its
worker streams back (progress relayed to the caller, the journal's go for gated calls),
by its time limit, by cancellation, or by its worker's death (retried when it may be)."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from typing import Any, Protocol

from toolbridge.backends.ray.calls import Pending, Stream, may_retry, never_started
from toolbridge.backends.ray.errors import (
    cancelled_error,
    failed_invocation,
    no_worker_error,
    worker_failed_error,
    worker_lost_error,
)
from toolbridge.backends.ray.pool import Pool
from toolbridge.backends.ray.wire import (
    ANSWER,
    CONTROL,
    FAILED,
    PROGRESS,
    STARTING,
    UNSTARTED,
    Call,
    Item,
    Request,
    from_wire,
    pack_message,
    unpack_message,
)
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.registry import Invocation, text_of, timeout_error
from toolbridge.core.tool import Tool
from toolbridge.execution.progress import ToolProgress

logger = logging.getLogger(__name__)


class _Settings(Protocol):
    """What a dispatcher reads of its `RayBackend`, when it needs it (typed here so that
    the backend, which makes the dispatchers, is not imported back)."""

    retries: int
    grace: float
    start_timeout: float
    _batches: itertools.count[int]


class Dispatcher:
    """The backend's work on one event loop: calls waiting for a worker, the requests they
    go out in (one per actor each time the loop comes round), and their answers."""

    def __init__(self, backend: _Settings) -> None:
        self.backend = backend
        self.waiting: dict[Pool, list[Pending]] = {}
        self.flush: asyncio.Handle | None = None
        self.retry_delay = 0.01
        self.tasks: set[asyncio.Task[None]] = set()
        self.cancels: dict[Stream, list[int]] = {}  # calls to stop, per request
        self.cancel_flush: asyncio.Handle | None = None

    def submit(self, call: Pending) -> None:
        self.waiting.setdefault(call.pool, []).append(call)
        loop = asyncio.get_running_loop()
        if isinstance(self.flush, asyncio.TimerHandle):
            # A pool still has no worker up, and `_send` looks again later: this call's
            # pool may have one now, so it does not wait for that pool's next look.
            self.flush.cancel()
            self.flush = None
        if self.flush is None:
            self.flush = loop.call_soon(self._send)
        if call.timer is None:
            call.timer = loop.call_at(call.deadline, self._expire, call)

    def _send(self) -> None:
        """Send every waiting call whose pool has a worker up: one request per actor."""
        self.flush = None
        for pool, calls in list(self.waiting.items()):
            up = pool.up()
            if not up:
                continue
            del self.waiting[pool]
            shares: dict[int, list[Pending]] = {}
            load = pool.load
            for call in calls:
                index = min(up, key=load.__getitem__)
                load[index] += 1
                shares.setdefault(index, []).append(call)
            for index, share in shares.items():
                self._request(pool, index, share)
        if self.waiting:  # some pool has no worker up yet: look again soon
            self.flush = asyncio.get_running_loop().call_later(self.retry_delay, self._send)
            self.retry_delay = min(self.retry_delay * 2, 0.25)
        else:
            self.retry_delay = 0.01

    def _request(self, pool: Pool, index: int, calls: list[Pending]) -> None:
        stream = Stream(pool, index, next(self.backend._batches), calls)
        contexts: dict[tuple[str, str, str], int] = {}
        wire: list[Call] = []
        loop = asyncio.get_running_loop()
        now = loop.time()
        for position, call in enumerate(calls):
            call.stream, call.position = stream, position
            call.tries += 1
            context = contexts.setdefault(call.context.key, len(contexts))
            budget = None if call.time_limit is None else call.deadline - now
            hook = call.on_start
            gated = hook is not None and hook.gated
            told = hook is not None and not gated
            wire.append(
                Call(
                    context, call.tool.name, call.arguments, call.call_id, call.time_limit,
                    budget, call.sink is not None, gated, told,
                )
            )  # fmt: skip
        unique = {call.context.key: call.context for call in calls}
        request = Request(stream.batch, tuple(unique.values()), tuple(wire))
        try:
            packed = pack_message(request)
            if len(calls) == 1 and calls[0].sink is None and calls[0].on_start is None:
                # One call, nothing to stream: one reply, awaited without a task of its own.
                reply = asyncio.wrap_future(stream.actor.answer.remote(packed).future())
                reply.add_done_callback(functools.partial(self._replied, stream))
                return
            refs = stream.actor.run.options(num_returns="streaming").remote(packed)
        except Exception as exc:  # the request cannot be sent (a config Ray cannot pickle)
            logger.exception("sending %d calls to a worker failed", len(calls))
            failure = f"{type(exc).__name__}: {text_of(exc)}"
            self._fail(stream, f"the request could not be sent ({failure})")
            return
        task = loop.create_task(self._receive(stream, refs))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _replied(self, stream: Stream, reply: asyncio.Future[bytes]) -> None:
        """The one reply of a request of one call (see `_receive`)."""
        try:
            self._chunk(stream, unpack_message(reply.result()))
        except Exception as exc:
            self._broke(stream, exc)
        self._fail(stream, "its request ended without an answer")

    async def _receive(self, stream: Stream, refs: Any) -> None:
        """Deliver what the stream brings; when it breaks, settle the calls it still had."""
        try:
            async for ref in refs:
                self._chunk(stream, unpack_message(await ref))
        except Exception as exc:
            self._broke(stream, exc)
        self._fail(stream, "its request ended without an answer")

    def _broke(self, stream: Stream, exc: Exception) -> None:
        """A request's answers stopped coming: retry or answer the calls it still had."""
        import ray.exceptions

        if isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.ActorUnavailableError):
            self._lost(stream, exc)
        elif isinstance(exc, ray.exceptions.RayTaskError):  # the worker failed outside tools
            logger.error("a worker failed on a request of %d calls: %s", len(stream.calls), exc)
            self._fail(stream, repr(exc.cause))
        else:  # Ray's transport, or a fault here: said, never a hang
            logger.error("receiving the answers of %d calls failed", len(stream.calls),
                         exc_info=exc)  # fmt: skip
            self._fail(stream, f"{type(exc).__name__}: {text_of(exc)}")

    def _chunk(self, stream: Stream, chunk: list[Item]) -> None:
        starting: list[Pending] = []
        for position, kind, payload in chunk:
            call = stream.calls[position]
            if call.stream is not stream:  # since retried elsewhere
                continue
            if kind != STARTING:
                self._deliver(call, kind, payload)
            elif call.on_start is None:
                continue
            elif call.on_start.gated:  # it waits for the caller's go (a no, if answered)
                starting.append(call)
            elif not call.answered:  # its tool starts now (the caller may have stopped waiting)
                call.on_start.started()
        if starting:
            task = asyncio.get_running_loop().create_task(self._start(stream, starting))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _start(self, stream: Stream, calls: list[Pending]) -> None:
        """Calls their worker is about to start (they have a slot there, and a thread for a
        sync tool): the journal records each running, then
        the worker hears in one message which may start. A call whose start cannot be
        recorded is answered here with the journal's error and never starts. The time the
        journal takes is not the calls': their clocks stop meanwhile, and the worker
        hears how long they stopped (a local call's limit starts once its start is
        recorded, too). A sync tool's call excepted, on the worker as locally: its thread
        asked once its limit ran there, and the time counts (here it only moves the
        deadline this side keeps in case the worker never answers)."""
        loop = asyncio.get_running_loop()
        asked = loop.time()
        for call in calls:
            if call.timer is not None:
                call.timer.cancel()
                call.timer = None
        verdicts = await asyncio.gather(*(self._verdict(call, stream) for call in calls))
        stopped = loop.time() - asked
        go: dict[int, float | None] = {}
        for call, refusal in zip(calls, verdicts, strict=True):
            on_start = call.on_start
            assert on_start is not None
            if _gone(call, stream):  # stopped, or its worker died meanwhile: never started
                go[call.position] = None
            elif refusal is not None:
                go[call.position] = None
                self._finish(call, failed_invocation(refusal))
            else:
                go[call.position] = stopped
                call.started = True
                on_start.started()
            if call.timer is None and not call.answered:
                if call.stream is stream:
                    call.deadline += stopped
                call.timer = loop.call_at(call.deadline, self._expire, call)
        try:
            stream.actor.go.options(concurrency_group=CONTROL).remote(stream.batch, go)
        except Exception as exc:  # Ray's transport: the stream breaks too, and says so
            logger.error("telling a worker to start %d calls failed: %r", len(go), exc)

    async def _verdict(self, call: Pending, stream: Stream) -> ToolError | None:
        """What the call's start hook says (None: start it); its failure stops the call."""
        assert call.on_start is not None
        if _gone(call, stream):  # nothing to record: it will not start here
            return None
        try:
            return await call.on_start()
        except Exception as exc:
            logger.exception("recording the start of call %r failed", call.call_id)
            return worker_failed_error(call.tool.name, f"recording its start failed ({exc!r})")

    def _fail(self, stream: Stream, cause: str) -> None:
        for call in stream.calls:
            if call.stream is stream and not call.answered:
                self._deliver(call, FAILED, cause)

    def _deliver(self, call: Pending, kind: int, payload: Any) -> None:
        if kind != PROGRESS:
            if call.reported:  # a worker's fault: the first outcome stands
                logger.warning(
                    "ignored a second outcome (kind %d) from the worker for call %r (%s): "
                    "the first stands", kind, call.call_id, call.tool.name,
                )  # fmt: skip
                return
            call.reported = True
        if call.answered:
            return
        if kind == PROGRESS:
            if call.sink is not None and not call.future.done():
                try:
                    call.sink(ToolProgress(*payload))
                except Exception:  # a listener's failure must not fail the call
                    logger.exception("progress sink %r failed", call.sink)
            return
        if kind in (ANSWER, UNSTARTED):
            invocation = from_wire(payload)
            self._finish(call, invocation)
            error = invocation.error
            if error is None or error.kind is not ErrorKind.TIMEOUT or kind == UNSTARTED:
                return
            if _blocking(call.tool):
                # its thread runs on: only a new process stops it
                self._restart(call.stream, "a blocking call outlived its time limit")
        elif kind == FAILED:
            logger.error("the worker failed on call %r (%s): %s", call.call_id, call.tool.name,
                         payload)  # fmt: skip
            self._finish(call, failed_invocation(worker_failed_error(call.tool.name, str(payload))))
        else:  # cancelled on the worker: the caller stopped waiting for it
            call.dropped = not payload  # its tool never started there
            self._finish(call, failed_invocation(cancelled_error(call.tool.name)))

    def _finish(self, call: Pending, invocation: Invocation) -> None:
        call.answered = True
        if call.stream is not None:
            call.stream.pool.load[call.stream.index] -= 1
        if call.timer is not None:
            call.timer.cancel()
        if not call.future.done():
            call.future.set_result(invocation)
        if call.waiter is not None and not call.waiter.done():
            call.waiter.set_result(None)

    def _lost(self, stream: Stream, exc: Exception) -> None:
        """The worker died: retry what may be retried on a fresh one, answer the rest."""
        stream.pool.restarted(stream.index)
        for call in stream.calls:
            if call.answered or call.stream is not stream:
                continue
            logger.warning("worker of call %r (%s) was lost on attempt %d: %s",
                           call.call_id, call.tool.name, call.tries, exc)  # fmt: skip
            if call.future.done():  # the caller stopped waiting
                self._finish(call, failed_invocation(cancelled_error(call.tool.name)))
            elif may_retry(call) and call.tries <= self.backend.retries:
                self._requeue(stream, call)
            else:
                self._finish(call, failed_invocation(worker_lost_error(call, exc)))

    def _requeue(self, stream: Stream, call: Pending) -> None:
        """Send a call of a dead worker to the next one up, within what is left of its
        limit (a fresh wait when it has none)."""
        stream.pool.load[stream.index] -= 1
        call.stream = None
        call.started = False
        call.reported = False
        if call.timer is not None:  # it may be past its limit: its grace timer
            call.timer.cancel()
            call.timer = None
        if call.time_limit is None:  # a fresh wait for a fresh worker
            call.deadline = asyncio.get_running_loop().time() + self.backend.start_timeout
        self.submit(call)

    def _expire(self, call: Pending) -> None:
        """The call's deadline: one still waiting for a worker fails now; one that runs
        gets `grace` seconds more for its worker's own answer, then its worker goes."""
        call.timer = None
        if call.answered:
            return
        if call.stream is None:
            self.waiting[call.pool].remove(call)
            if not self.waiting[call.pool]:
                del self.waiting[call.pool]
            # A retry that outlived its limit timed out; a first try never started.
            limit = call.time_limit
            late = timeout_error(call.tool.name, limit) if call.tries and limit else None
            self._finish(call, failed_invocation(late or no_worker_error(call)))
        elif call.time_limit is not None:
            loop = asyncio.get_running_loop()
            call.timer = loop.call_later(self.backend.grace, self._overdue, call)

    def _overdue(self, call: Pending) -> None:
        call.timer = None
        if call.answered or call.stream is None:
            return
        assert call.time_limit is not None
        stream = call.stream
        self._finish(
            call, failed_invocation(timeout_error(call.tool.name, call.time_limit), TimeoutError())
        )
        self._restart(stream, "a call did not stop at its time limit")

    def _restart(self, stream: Stream | None, why: str) -> None:
        import ray

        if stream is None:
            return
        logger.warning("restarting a worker: %s", why)
        ray.kill(stream.actor, no_restart=False)
        stream.pool.restarted(stream.index)

    async def stop(self, call: Pending) -> None:
        """The caller was cancelled: stop the call on its worker (kill the worker when the
        call runs blocking code, unless it never started, or does not stop within
        `grace`)."""
        if call.answered:
            return
        if call.stream is None:
            waiting = self.waiting.get(call.pool, [])
            if call in waiting:
                waiting.remove(call)
                if not waiting:  # else `_send` polls for a worker for nobody, forever
                    del self.waiting[call.pool]
            self._finish(call, failed_invocation(cancelled_error(call.tool.name)))
            return
        stream = call.stream
        call.waiter = asyncio.get_running_loop().create_future()
        self._cancel_soon(stream, call.position)
        done, _ = await asyncio.wait([call.waiter], timeout=self.backend.grace)
        if (_blocking(call.tool) and not never_started(call)) or not done:
            if not done:
                self._finish(call, failed_invocation(cancelled_error(call.tool.name)))
            self._restart(stream, "a cancelled call did not stop")

    def _cancel_soon(self, stream: Stream, position: int) -> None:
        """Stop a call on its worker together with the others stopped in this turn of the
        loop (a stopped run's calls): in one message, so that a call waiting for a slot
        on the worker is stopped before another's cancellation frees one."""
        self.cancels.setdefault(stream, []).append(position)
        if self.cancel_flush is None:
            self.cancel_flush = asyncio.get_running_loop().call_soon(self._send_cancels)

    def _send_cancels(self) -> None:
        self.cancel_flush = None
        cancels, self.cancels = self.cancels, {}
        for stream, positions in cancels.items():
            try:
                stream.actor.cancel.options(concurrency_group=CONTROL).remote(
                    stream.batch, positions
                )
            except Exception as exc:  # Ray's transport: the stop's grace kills the worker
                logger.error("telling a worker to stop %d calls failed: %r", len(positions), exc)


def _gone(call: Pending, stream: Stream) -> bool:
    """Whether a call asking to start on `stream` must not: it was answered, its caller
    stopped waiting, or its worker died and it went elsewhere."""
    return call.answered or call.future.done() or call.stream is not stream


def _blocking(tool: Tool) -> bool:
    """Whether the tool runs synchronous code in a thread, which only a process kill stops."""
    from toolbridge.core.function_tool import FunctionTool

    return isinstance(tool, FunctionTool) and not tool._is_async
