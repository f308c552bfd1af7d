"""`RayBackend`: run prepared calls on a Ray cluster, with the executor's semantics intact.

Only prepared, approved calls travel: the name, the validated arguments, the call id
and the context they run in. Each worker is a Ray actor that builds the tools once, from
an importable `ToolSource`, and runs each call through the same `run_prepared` a local
run uses, so the model reads the same texts; the caller's executor caps, spills and
reports results as it always does. Ray does the placement, transport, resource
accounting and restarts.

The calls that reach the backend together (one scheduling group of one or many
executors) go to each worker in one request; the worker streams back chunks of what
finished, and the progress its calls reported, as it happens.

A journaled call (the executor passes `on_start`) waits on its worker, once it has a
slot there, for the caller's go: the journal records it running first, so a call queued
on a busy worker is still queued in the journal, and one whose worker died before it
started goes to the next worker. A worker keeps the registries of the contexts it used
last (`contexts_per_worker`), not of every session it ever served.

A call's time limit starts when it reaches the backend, so waiting for a worker counts;
the worker stops the call at the limit. A call that runs blocking code, or whose worker
does not answer within `grace` seconds after the limit, has its worker killed and
restarted. A call whose worker died is answered with a ``worker_lost`` error, after
retries on a fresh worker when its tool is read-only or idempotent.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolbridge.backends import CallRunner, StartHook
from toolbridge.backends.ray.source import ToolSource
from toolbridge.backends.ray.wire import (
    _ANSWER,
    _FAILED,
    _PROGRESS,
    _STARTING,
    CONTROL,
    RemoteToolException,
    _Call,
    _Context,
    _invocation,
    _Item,
    _Request,
)
from toolbridge.backends.ray.worker import _Worker
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.registry import Invocation, PreparedCall, ToolRegistry, timeout_error
from toolbridge.core.tool import Tool, ToolResult
from toolbridge.execution.progress import ProgressSink, ToolProgress, current_progress_sink

__all__ = ["RayBackend", "RemoteToolException", "ToolSource"]

logger = logging.getLogger(__name__)

_RAY_KEYS = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}


@dataclass(slots=True, eq=False)
class _Pool:
    """The actors that run the calls of one resource shape: what each holds in flight, the
    process id of each actor's incarnation, and a readiness probe for each actor
    (re)starting. Probes are Ray object refs polled without blocking: the pool outlives
    any one event loop."""

    actors: list[Any]
    needs: Mapping[str, Any]
    load: list[int] = field(init=False)
    pids: list[int | None] = field(init=False)
    probes: dict[int, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.load = [0] * len(self.actors)
        self.pids = [None] * len(self.actors)
        self.probes = {index: actor.ready.remote() for index, actor in enumerate(self.actors)}

    def up(self) -> list[int]:
        """The actors that answer now."""
        if self.probes:
            self._poll()
        return [index for index in range(len(self.actors)) if index not in self.probes]

    def restarted(self, index: int) -> None:
        """The actor at `index` died or was killed: use it again once a new process answers."""
        if index not in self.probes:
            self.probes[index] = self.actors[index].ready.remote()

    def _poll(self) -> None:
        import ray
        import ray.exceptions

        for index, probe in list(self.probes.items()):
            ready, _ = ray.wait([probe], timeout=0)
            if not ready:
                continue
            try:
                pid = ray.get(probe)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                pid = None
            if pid is not None and pid != self.pids[index]:
                self.pids[index] = pid
                del self.probes[index]
            else:  # the old incarnation answered, or none yet: ask again
                self.probes[index] = self.actors[index].ready.remote()

    def missing(self) -> list[str]:
        """The resources this pool needs that no live node of the cluster has enough of."""
        import ray

        needs = {_RAY_KEYS.get(key, key): amount for key, amount in self.needs.items()}
        alive = ray.nodes()  # type: ignore[no-untyped-call]
        nodes = [node.get("Resources", {}) for node in alive if node.get("Alive")]
        return [key for key, amount in needs.items() if all(n.get(key, 0) < amount for n in nodes)]


@dataclass(slots=True, eq=False)
class _Pending:
    """A call on the caller's side, from the moment it reaches the backend to its answer."""

    tool: Tool
    pool: _Pool
    context: _Context
    arguments: dict[str, Any]
    call_id: str
    time_limit: float | None
    deadline: float  # loop time: the end of its limit, or of the wait for a worker
    sink: ProgressSink | None
    future: asyncio.Future[Invocation]
    retryable: bool
    on_start: StartHook | None = None  # the journal's: a worker waits for its verdict
    started: bool = False  # told to start (it may have): no longer safe to send elsewhere
    tries: int = 0
    stream: _Stream | None = None  # where it runs (None: waiting for a worker)
    position: int = 0
    answered: bool = False
    timer: asyncio.TimerHandle | None = None
    waiter: asyncio.Future[None] | None = None  # set by a caller waiting for it to stop


@dataclass(slots=True, eq=False)
class _Stream:
    """One request on one actor, and the calls it carries (by position)."""

    pool: _Pool
    index: int
    batch: int
    calls: list[_Pending]

    @property
    def actor(self) -> Any:
        return self.pool.actors[self.index]


class _Dispatcher:
    """The backend's work on one event loop: calls waiting for a worker, the requests they
    go out in (one per actor each time the loop comes round), and their answers."""

    def __init__(self, backend: RayBackend) -> None:
        self.backend = backend
        self.waiting: dict[_Pool, list[_Pending]] = {}
        self.flush: asyncio.Handle | None = None
        self.retry_delay = 0.01
        self.tasks: set[asyncio.Task[None]] = set()

    def submit(self, call: _Pending) -> None:
        self.waiting.setdefault(call.pool, []).append(call)
        loop = asyncio.get_running_loop()
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
            shares: dict[int, list[_Pending]] = {}
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

    def _request(self, pool: _Pool, index: int, calls: list[_Pending]) -> None:
        stream = _Stream(pool, index, next(self.backend._batches), calls)
        contexts: dict[tuple[str, str, str], int] = {}
        wire: list[_Call] = []
        loop = asyncio.get_running_loop()
        now = loop.time()
        for position, call in enumerate(calls):
            call.stream, call.position = stream, position
            call.tries += 1
            context = contexts.setdefault(call.context.key, len(contexts))
            budget = None if call.time_limit is None else call.deadline - now
            wire.append(
                _Call(
                    context, call.tool.name, call.arguments, call.call_id, call.time_limit,
                    budget, call.sink is not None, call.on_start is not None,
                )
            )  # fmt: skip
        unique = {call.context.key: call.context for call in calls}
        request = _Request(stream.batch, tuple(unique.values()), tuple(wire))
        try:
            if len(calls) == 1 and calls[0].sink is None and calls[0].on_start is None:
                refs = stream.actor.answer.remote(request)
            else:
                refs = stream.actor.run.options(num_returns="streaming").remote(request)
        except Exception as exc:  # the request cannot be sent (a config Ray cannot pickle)
            logger.exception("sending %d calls to a worker failed", len(calls))
            self._fail(stream, f"the request could not be sent ({type(exc).__name__}: {exc})")
            return
        task = loop.create_task(self._receive(stream, refs))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _receive(self, stream: _Stream, refs: Any) -> None:
        """Deliver what the stream brings; when it breaks, settle the calls it still had."""
        import ray
        import ray.exceptions

        try:
            if isinstance(refs, ray.ObjectRef):
                self._chunk(stream, await refs)
            else:
                async for ref in refs:
                    self._chunk(stream, await ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            self._lost(stream, exc)
        except ray.exceptions.RayTaskError as exc:  # the worker failed outside any tool
            logger.error("a worker failed on a request of %d calls: %s", len(stream.calls), exc)
            self._fail(stream, repr(exc.cause))
        except Exception as exc:  # Ray's transport, or a fault here: said, never a hang
            logger.exception("receiving the answers of %d calls failed", len(stream.calls))
            self._fail(stream, f"{type(exc).__name__}: {exc}")
        self._fail(stream, "its request ended without an answer")

    def _chunk(self, stream: _Stream, chunk: list[_Item]) -> None:
        starting: list[_Pending] = []
        for position, kind, payload in chunk:
            call = stream.calls[position]
            if call.stream is not stream:  # since retried elsewhere
                continue
            if kind == _STARTING:
                starting.append(call)
            else:
                self._deliver(call, kind, payload)
        if starting:
            task = asyncio.get_running_loop().create_task(self._start(stream, starting))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _start(self, stream: _Stream, calls: list[_Pending]) -> None:
        """Calls that have a slot on their worker: the journal records each running, then
        the worker hears in one message which may start. A call whose start cannot be
        recorded is answered here with the journal's error and never starts."""
        verdicts = await asyncio.gather(*(self._verdict(call, stream) for call in calls))
        go: dict[int, bool] = {}
        for call, refusal in zip(calls, verdicts, strict=True):
            if _gone(call, stream):  # stopped, or its worker died meanwhile
                go[call.position] = False
            elif refusal is not None:
                go[call.position] = False
                self._finish(call, _failed(refusal))
            else:
                go[call.position] = call.started = True
        try:
            stream.actor.go.options(concurrency_group=CONTROL).remote(stream.batch, go)
        except Exception as exc:  # Ray's transport: the stream breaks too, and says so
            logger.error("telling a worker to start %d calls failed: %r", len(go), exc)

    async def _verdict(self, call: _Pending, stream: _Stream) -> ToolError | None:
        """What the call's start hook says (None: start it); its failure stops the call."""
        assert call.on_start is not None
        if _gone(call, stream):  # nothing to record: it will not start here
            return None
        try:
            return await call.on_start()
        except Exception as exc:
            logger.exception("recording the start of call %r failed", call.call_id)
            return _worker_failed(call.tool.name, f"recording its start failed ({exc!r})")

    def _fail(self, stream: _Stream, cause: str) -> None:
        for call in stream.calls:
            if call.stream is stream and not call.answered:
                self._deliver(call, _FAILED, cause)

    def _deliver(self, call: _Pending, kind: int, payload: Any) -> None:
        if call.answered:
            return
        if kind == _PROGRESS:
            if call.sink is not None and not call.future.done():
                try:
                    call.sink(ToolProgress(*payload))
                except Exception:  # a listener's failure must not fail the call
                    logger.exception("progress sink %r failed", call.sink)
            return
        if kind == _ANSWER:
            invocation = _invocation(payload)
            self._finish(call, invocation)
            error = invocation.error
            if error is not None and error.kind is ErrorKind.TIMEOUT and _blocking(call.tool):
                # its thread runs on: only a new process stops it
                self._restart(call.stream, "a blocking call outlived its time limit")
        elif kind == _FAILED:
            logger.error("the worker failed on call %r (%s): %s", call.call_id, call.tool.name,
                         payload)  # fmt: skip
            self._finish(call, _failed(_worker_failed(call.tool.name, str(payload))))
        else:  # cancelled on the worker: the caller stopped waiting for it
            self._finish(call, _failed(_cancelled(call.tool.name)))

    def _finish(self, call: _Pending, invocation: Invocation) -> None:
        call.answered = True
        if call.stream is not None:
            call.stream.pool.load[call.stream.index] -= 1
        if call.timer is not None:
            call.timer.cancel()
        if not call.future.done():
            call.future.set_result(invocation)
        if call.waiter is not None and not call.waiter.done():
            call.waiter.set_result(None)

    def _lost(self, stream: _Stream, exc: Exception) -> None:
        """The worker died: retry what may be retried on a fresh one, answer the rest."""
        stream.pool.restarted(stream.index)
        for call in stream.calls:
            if call.answered or call.stream is not stream:
                continue
            logger.warning("worker of call %r (%s) was lost on attempt %d: %s",
                           call.call_id, call.tool.name, call.tries, exc)  # fmt: skip
            if call.future.done():  # the caller stopped waiting
                self._finish(call, _failed(_cancelled(call.tool.name)))
            elif _may_retry(call) and call.tries <= self.backend.retries:
                self._requeue(stream, call)
            else:
                self._finish(call, _failed(_worker_lost(call, exc)))

    def _requeue(self, stream: _Stream, call: _Pending) -> None:
        """Send a call of a dead worker to the next one up, within what is left of its
        limit (a fresh wait when it has none)."""
        stream.pool.load[stream.index] -= 1
        call.stream = None
        call.started = False
        if call.timer is not None:  # it may be past its limit: its grace timer
            call.timer.cancel()
            call.timer = None
        if call.time_limit is None:  # a fresh wait for a fresh worker
            call.deadline = asyncio.get_running_loop().time() + self.backend.start_timeout
        self.submit(call)

    def _expire(self, call: _Pending) -> None:
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
            self._finish(call, _failed(late or _no_worker(call)))
        elif call.time_limit is not None:
            loop = asyncio.get_running_loop()
            call.timer = loop.call_later(self.backend.grace, self._overdue, call)

    def _overdue(self, call: _Pending) -> None:
        call.timer = None
        if call.answered or call.stream is None:
            return
        assert call.time_limit is not None
        stream = call.stream
        self._finish(call, _failed(timeout_error(call.tool.name, call.time_limit), TimeoutError()))
        self._restart(stream, "a call did not stop at its time limit")

    def _restart(self, stream: _Stream | None, why: str) -> None:
        import ray

        if stream is None:
            return
        logger.warning("restarting a worker: %s", why)
        ray.kill(stream.actor, no_restart=False)
        stream.pool.restarted(stream.index)

    async def stop(self, call: _Pending) -> None:
        """The caller was cancelled: stop the call on its worker (kill the worker when the
        call runs blocking code or does not stop within `grace`)."""
        if call.answered:
            return
        if call.stream is None:
            waiting = self.waiting.get(call.pool, [])
            if call in waiting:
                waiting.remove(call)
                if not waiting:  # else `_send` polls for a worker for nobody, forever
                    del self.waiting[call.pool]
            self._finish(call, _failed(_cancelled(call.tool.name)))
            return
        stream = call.stream
        call.waiter = asyncio.get_running_loop().create_future()
        stream.actor.cancel.options(concurrency_group=CONTROL).remote(stream.batch, call.position)
        done, _ = await asyncio.wait([call.waiter], timeout=self.backend.grace)
        if _blocking(call.tool) or not done:
            if not done:
                self._finish(call, _failed(_cancelled(call.tool.name)))
            self._restart(stream, "a cancelled call did not stop")


class RayBackend:
    """Runs calls on Ray actors built from `source` (see the module docstring).

    `workers` actors serve tools without resource needs. A tool that declares
    ``ray_resources`` (Ray's own keys: ``num_cpus``, ``num_gpus``, ``memory``, and custom
    resources such as ``{"sandbox": 1}``) runs on its own pool of `workers_per_resource`
    actors placed by Ray where those resources are. `retries`: how many more times a
    read-only or idempotent call (or a journaled one that had not started) is tried on a
    fresh worker after its worker died.
    `max_calls_per_worker`: how many calls one worker runs at once (more wait there, within
    their limits). `start_timeout`: how long a call without a time limit waits for a worker
    to take it. `contexts_per_worker`: how many sessions' registries a worker keeps built
    (the one used longest ago goes first).
    """

    defers_start = True  # a call may wait on its worker: the journal hears when it starts

    def __init__(
        self,
        source: ToolSource,
        *,
        workers: int = 2,
        workers_per_resource: int = 1,
        max_calls_per_worker: int = 1000,
        contexts_per_worker: int = 32,
        retries: int = 2,
        grace: float = 1.0,
        start_timeout: float = 60.0,
        address: str | None = None,
    ) -> None:
        import ray

        if contexts_per_worker < 1:
            raise ValueError(
                f"contexts_per_worker must be >= 1, got {contexts_per_worker}: it is how many "
                "sessions' tools a worker keeps built"
            )

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.source = source
        self.workers = workers
        self.workers_per_resource = workers_per_resource
        self.max_calls_per_worker = max_calls_per_worker
        self.contexts_per_worker = contexts_per_worker
        self.retries = retries
        self.grace = grace
        self.start_timeout = start_timeout
        self._remote = ray.remote(concurrency_groups={CONTROL: 2})(_Worker)  # type: ignore[call-overload]
        self._pools: dict[tuple[tuple[str, Any], ...], _Pool] = {}
        self._batches = itertools.count()
        self._dispatchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Dispatcher] = (
            weakref.WeakKeyDictionary()
        )

    def bind(self, registry: ToolRegistry) -> CallRunner:
        ctx = registry.context
        context = _Context(str(ctx.workspace), ctx.session, dict(ctx.config))
        here = functools.partial(registry.run_prepared, approved=True)

        async def run(
            prepared: PreparedCall,
            *,
            call_id: str | None = None,
            time_limit: float | None,
            on_start: StartHook | None = None,
        ) -> Invocation:
            if getattr(prepared.tool, "caller_side", False):  # e.g. the pager: state is here
                refusal = None if on_start is None else await on_start()
                if refusal is not None:
                    return _failed(refusal)
                return await here(prepared, call_id=call_id, time_limit=time_limit)
            return await self.run(prepared, context, call_id or "", time_limit, on_start)

        return run

    def start(self, tools: Iterable[Tool] = (), *, timeout: float = 60.0) -> None:
        """Start the workers of `tools` (and those for tools without resource needs) and
        wait until they answer. A call's time limit counts its wait for a worker, so
        starting ahead spares the first calls a cold start. Raises `TimeoutError` (naming
        any resource no node has) when some are not up within `timeout` seconds."""
        import ray

        pools = {id(pool): pool for pool in [self._pool(None), *map(self._pool, tools)]}
        probes = [probe for pool in pools.values() for probe in pool.probes.values()]
        ray.wait(probes, num_returns=len(probes), timeout=timeout)
        late = [pool for pool in pools.values() if len(pool.up()) < len(pool.actors)]
        if late:
            missing = sorted({key for pool in late for key in pool.missing()})
            why = f": no node offers {', '.join(map(repr, missing))}" if missing else ""
            raise TimeoutError(
                f"{len(late)} Ray worker pool(s) did not start in {timeout:g} s{why}"
            )

    def _pool(self, tool: Tool | None) -> _Pool:
        resources: Mapping[str, Any] = getattr(tool, "ray_resources", None) or {}
        shape = tuple(sorted(resources.items()))
        pool = self._pools.get(shape)
        if pool is None:
            options: dict[str, Any] = {
                "max_restarts": -1,
                "max_task_retries": 0,
                "max_concurrency": self.max_calls_per_worker + 8,  # + readiness probes
                "num_cpus": 0,
            }
            custom = {k: v for k, v in resources.items() if k not in _RAY_KEYS}
            options.update({k: v for k, v in resources.items() if k not in custom})
            if custom:
                options["resources"] = custom
            size = self.workers_per_resource if resources else self.workers
            worker = self._remote.options(**options)
            actors = [
                worker.remote(self.source, self.max_calls_per_worker, self.contexts_per_worker)
                for _ in range(size)
            ]
            pool = self._pools[shape] = _Pool(actors, dict(resources))
        return pool

    async def run(
        self,
        prepared: PreparedCall,
        context: _Context,
        call_id: str,
        time_limit: float | None,
        on_start: StartHook | None = None,
    ) -> Invocation:
        """Run one prepared call on a worker; its time limit counts from now. `on_start` is
        awaited once a worker has a slot for it, before its tool starts (see `StartHook`)."""
        tool, arguments = prepared.tool, prepared.arguments
        assert tool is not None and arguments is not None
        loop = asyncio.get_running_loop()
        dispatcher = self._dispatchers.get(loop)
        if dispatcher is None:
            dispatcher = self._dispatchers[loop] = _Dispatcher(self)
        wait = self.start_timeout if time_limit is None else time_limit
        call = _Pending(
            tool, self._pool(tool), context, arguments, call_id, time_limit,
            loop.time() + wait, current_progress_sink(), loop.create_future(),
            tool.read_only or bool(getattr(tool, "idempotent", False)), on_start,
        )  # fmt: skip
        dispatcher.submit(call)
        try:
            return await call.future
        except asyncio.CancelledError:
            await asyncio.shield(dispatcher.stop(call))
            raise

    def close(self) -> None:
        """Kill every worker actor (the Ray runtime itself stays up)."""
        import ray

        for pool in self._pools.values():
            for actor in pool.actors:
                ray.kill(actor, no_restart=True)
        self._pools.clear()


def _gone(call: _Pending, stream: _Stream) -> bool:
    """Whether a call asking to start on `stream` must not: it was answered, its caller
    stopped waiting, or its worker died and it went elsewhere."""
    return call.answered or call.future.done() or call.stream is not stream


def _may_retry(call: _Pending) -> bool:
    """Whether a call of a dead worker may go to another: its tool is safe to run again,
    or it never started (the journal heard of no start)."""
    return call.retryable or (call.on_start is not None and not call.started)


def _blocking(tool: Tool) -> bool:
    """Whether the tool runs synchronous code in a thread, which only a process kill stops."""
    from toolbridge.core.function_tool import FunctionTool

    return isinstance(tool, FunctionTool) and not tool._is_async


def _failed(error: ToolError, exception: BaseException | None = None) -> Invocation:
    return Invocation(ToolResult.error(error), None, error, exception)


# --- texts only a cluster needs (every other text comes from the registry, as locally) ---


def _no_worker(call: _Pending) -> ToolError:
    """A call no worker took before its deadline: say which resource no node has, if so."""
    name = call.tool.name
    missing = call.pool.missing() if call.pool.needs else []
    if missing:
        offers = " or ".join(repr(key) for key in missing)
        return ToolError(
            ErrorKind.EXECUTION_ERROR,
            f"no worker offers resource {offers}, which tool {name!r} needs: no node of the "
            "Ray cluster has it, so the call did not run.",
            "Do not call this tool again now; tell the user the cluster needs a node with "
            f"that resource (the tool asks for {dict(call.pool.needs)}).",
        )
    limit = call.time_limit
    within = f"its time limit of {limit:g} s" if limit is not None else "the time allowed"
    return ToolError(
        ErrorKind.TIMEOUT,
        f"tool {name!r} did not start within {within}: no Ray worker for it was up in "
        "time (the cluster is busy or still starting one), so the call did not run.",
        "Try again later, or tell the user the cluster is short of workers.",
    )


def _worker_failed(tool_name: str, cause: str) -> ToolError:
    return ToolError(
        ErrorKind.EXECUTION_ERROR,
        f"the worker running {tool_name!r} failed outside the tool: {cause}.",
        "Tell the user; the cluster or its tool source needs attention.",
    )


def _cancelled(tool_name: str) -> ToolError:
    return ToolError(
        ErrorKind.CANCELLED,
        f"the call to {tool_name!r} was cancelled before it finished.",
        "It may have partly run: check its effects before calling it again.",
    )


def _worker_lost(call: _Pending, exc: Exception | None) -> ToolError:
    again = (
        f" (tried {call.tries} times)" if _may_retry(call)
        else " (not retried: it may have side effects)"
    )  # fmt: skip
    return ToolError(
        ErrorKind.WORKER_LOST,
        f"the worker running {call.tool.name!r} died before it answered{again}; it may have "
        f"partly run. Cause: {type(exc).__name__ if exc else 'unknown'}.",
        "Check its effects before calling it again.",
    )
