"""`RayBackend`: run prepared calls on a Ray cluster, with the executor's semantics intact.

Only prepared, approved calls travel: the name, the validated arguments, the call id
and the context they run in. Each worker is a Ray actor that builds the tools once, from
an importable `ToolSource`, and answers with the same `Invocation` a local run gives;
the caller's executor caps, spills and reports results as it always does. Ray does the
placement, transport, resource accounting and restarts.

A timed-out call is cancelled on its worker; one that does not stop within `grace`
seconds (blocking code) has its worker killed and restarted. A call whose worker died
is answered with a ``worker_lost`` error, after retries on a fresh worker when its tool is
read-only or idempotent.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import logging
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolbridge.backends import CallRunner
from toolbridge.errors import ErrorKind, ToolError
from toolbridge.registry import Invocation, PreparedCall, ToolRegistry
from toolbridge.tool import Tool, ToolContext, ToolResult

__all__ = ["RayBackend", "RemoteToolException", "ToolSource"]

logger = logging.getLogger(__name__)

_RAY_KEYS = ("num_cpus", "num_gpus", "memory")


@dataclass(frozen=True, slots=True)
class ToolSource:
    """How a worker builds its tools: an importable factory, or the tool loader.

    `factory` is ``"module:attribute"``, a callable taking a `ToolContext` and returning a
    `ToolRegistry` or tools; without it, the built-in tools and plugins of `scope` are
    loaded. The caller builds its own registry from the same source (`registry`), so
    both sides agree on every tool's schema and flags.
    """

    factory: str | None = None
    scope: str = "default"

    def registry(self, ctx: ToolContext) -> ToolRegistry:
        if self.factory is None:
            from toolbridge.loader import ToolLoader

            return ToolLoader().registry(ctx, scope=self.scope)
        module_name, _, attribute = self.factory.partition(":")
        if not attribute:
            raise ValueError(f"factory {self.factory!r} must look like 'module:attribute'")
        built = getattr(importlib.import_module(module_name), attribute)(ctx)
        if isinstance(built, ToolRegistry):
            return built
        return ToolRegistry(list(built), context=ctx)


class RemoteToolException(Exception):
    """Stands for an exception raised on a worker (its type name and message)."""


@dataclass(frozen=True, slots=True)
class _Context:
    """The picklable part of a `ToolContext`: what a worker needs to build and run tools."""

    workspace: str
    session: str
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.workspace, self.session, json.dumps(self.config, sort_keys=True, default=repr))

    def tool_context(self) -> ToolContext:
        from pathlib import Path

        return ToolContext(workspace=Path(self.workspace), config=self.config, session=self.session)


class _Worker:
    """The actor: builds the registry of each context once, runs prepared calls on it."""

    def __init__(self, source: ToolSource) -> None:
        self.source = source
        self.registries: dict[tuple[str, str, str], ToolRegistry] = {}

    def ready(self) -> int:
        """The process id of this incarnation: answers once the actor is up."""
        return os.getpid()

    async def call(
        self, request: tuple[_Context, str, dict[str, Any], str]
    ) -> tuple[ToolResult, ToolError | None, tuple[str, str] | None, bytes | None]:
        """Run one call; the request is one tuple, so Ray serialises one object, not four."""
        context, name, arguments, call_id = request
        registry = self.registries.get(context.key)
        if registry is None:
            registry = self.registries[context.key] = self.source.registry(context.tool_context())
        tool = registry.get(name)
        if tool is None:
            error = ToolError(
                ErrorKind.EXECUTION_ERROR,
                f"the worker has no tool {name!r}: its ToolSource builds other tools than "
                "the caller's registry.",
                "Tell the user; the cluster is misconfigured.",
            )
            return ToolResult.error(error), error, None, None
        prepared = PreparedCall(name, tool, arguments, None)
        invocation = await registry.run_prepared(
            prepared, call_id=call_id, time_limit=None, approved=True
        )
        exception = invocation.exception
        described = (type(exception).__name__, str(exception)) if exception else None
        try:
            value = pickle.dumps(invocation.value) if invocation.value is not None else None
        except Exception:
            value = None  # the caller gets the result without the raw value
        return invocation.result, invocation.error, described, value


@dataclass(slots=True)
class _Pool:
    """The actors that run the calls of one resource shape: in-flight counts, the process
    id of each actor's incarnation, and a readiness probe for each actor (re)starting.

    Probes are Ray object refs polled without blocking, not tasks: the pool outlives any
    one event loop.
    """

    actors: list[Any]
    load: list[int] = field(init=False)
    pids: list[int | None] = field(init=False)
    probes: dict[int, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.load = [0] * len(self.actors)
        self.pids = [None] * len(self.actors)
        self.probes = {index: actor.ready.remote() for index, actor in enumerate(self.actors)}

    async def pick(self) -> int:
        """The least loaded actor that is up; waits for a (re)start when none is."""
        delay = 0.01
        while True:
            self._poll()
            up = [i for i in range(len(self.actors)) if i not in self.probes]
            if up:
                return min(up, key=self.load.__getitem__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

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


class RayBackend:
    """Runs calls on Ray actors built from `source` (see the module docstring).

    `workers` actors serve tools without resource needs. A tool that declares
    ``ray_resources`` (Ray's own keys: ``num_cpus``, ``num_gpus``, ``memory``, and custom
    resources such as ``{"sandbox": 1}``) runs on its own pool of `workers_per_resource`
    actors placed by Ray where those resources are. `retries`: how many more times a
    read-only or idempotent call is tried on a fresh worker after its worker died.
    """

    def __init__(
        self,
        source: ToolSource,
        *,
        workers: int = 2,
        workers_per_resource: int = 1,
        max_calls_per_worker: int = 1000,
        retries: int = 2,
        grace: float = 1.0,
        address: str | None = None,
    ) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.source = source
        self.workers = workers
        self.workers_per_resource = workers_per_resource
        self.max_calls_per_worker = max_calls_per_worker
        self.retries = retries
        self.grace = grace
        self._remote = ray.remote(_Worker)
        self._pools: dict[tuple[tuple[str, Any], ...], _Pool] = {}

    def bind(self, registry: ToolRegistry) -> CallRunner:
        ctx = registry.context
        context = _Context(str(ctx.workspace), ctx.session, dict(ctx.config))
        here = functools.partial(registry.run_prepared, approved=True)

        async def run(
            prepared: PreparedCall, *, call_id: str | None = None, time_limit: float | None
        ) -> Invocation:
            if getattr(prepared.tool, "caller_side", False):  # e.g. the pager: state is here
                return await here(prepared, call_id=call_id, time_limit=time_limit)
            return await self.run(prepared, context, call_id or "", time_limit)

        return run

    def _pool(self, tool: Tool) -> _Pool:
        resources: Mapping[str, Any] = getattr(tool, "ray_resources", None) or {}
        shape = tuple(sorted(resources.items()))
        pool = self._pools.get(shape)
        if pool is None:
            options: dict[str, Any] = {
                "max_restarts": -1,
                "max_task_retries": 0,
                "max_concurrency": self.max_calls_per_worker,
                "num_cpus": 0,
            }
            custom = {k: v for k, v in resources.items() if k not in _RAY_KEYS}
            options.update({k: v for k, v in resources.items() if k not in custom})
            if custom:
                options["resources"] = custom
            size = self.workers_per_resource if resources else self.workers
            actors = [self._remote.options(**options).remote(self.source) for _ in range(size)]
            pool = self._pools[shape] = _Pool(actors)
        return pool

    async def run(
        self, prepared: PreparedCall, context: _Context, call_id: str, time_limit: float | None
    ) -> Invocation:
        import ray.exceptions

        tool, arguments = prepared.tool, prepared.arguments
        assert tool is not None and arguments is not None
        pool = self._pool(tool)
        retryable = tool.read_only or bool(getattr(tool, "idempotent", False))
        attempts = 1 + (self.retries if retryable else 0)
        lost: Exception | None = None
        for attempt in range(attempts):
            index = await pool.pick()
            pool.load[index] += 1
            try:
                ref = pool.actors[index].call.remote((context, tool.name, arguments, call_id))
                if time_limit is None:  # the common case: Ray's own awaitable, nothing more
                    try:
                        wire = await ref
                    except asyncio.CancelledError:
                        await asyncio.shield(
                            self._stop(ref, _answer(ref), pool, index, kill=_blocking(tool))
                        )
                        raise
                else:
                    wire = await self._within(ref, time_limit, pool, index, tool)
                if wire is None:
                    assert time_limit is not None
                    return _failed(_timed_out(tool.name, time_limit))
            except ray.exceptions.RayTaskError as exc:  # the worker failed outside the tool
                logger.error("worker failed on call %r (%s): %s", call_id, tool.name, exc)
                return _failed(
                    ToolError(
                        ErrorKind.EXECUTION_ERROR,
                        f"the worker running {tool.name!r} failed: {exc.cause!r}.",
                        "Tell the user; the cluster or its tool source needs attention.",
                    )
                )
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                lost = exc
                pool.restarted(index)
                logger.warning(
                    "worker of call %r (%s) was lost on attempt %d: %s", call_id, tool.name,
                    attempt + 1, exc,
                )  # fmt: skip
                continue
            finally:
                pool.load[index] -= 1
            result, error, described, value = wire
            exception = RemoteToolException(": ".join(described)) if described else None
            return Invocation(result, pickle.loads(value) if value else None, error, exception)
        return _failed(_worker_lost(tool.name, attempts, retryable, lost))

    async def _within(
        self, ref: Any, time_limit: float, pool: _Pool, index: int, tool: Tool
    ) -> Any:
        """The call's answer if it comes within `time_limit`; else stop it and return None."""
        answer = _answer(ref)
        try:
            return await asyncio.wait_for(asyncio.shield(answer), time_limit)
        except TimeoutError:
            await self._stop(ref, answer, pool, index, kill=_blocking(tool))
            return None
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(ref, answer, pool, index, kill=_blocking(tool)))
            raise

    async def _stop(
        self, ref: Any, answer: asyncio.Future[Any], pool: _Pool, index: int, *, kill: bool
    ) -> None:
        """Cancel a call on its worker; kill (and so restart) the worker when the call runs
        blocking code (cancelling cannot stop a thread) or does not stop within `grace`."""
        import ray

        ray.cancel(ref)
        done, _ = await asyncio.wait([answer], timeout=self.grace)
        if kill or not done:
            logger.warning("restarting a worker to stop a call that outlived its limit")
            ray.kill(pool.actors[index], no_restart=False)
            pool.restarted(index)

    def close(self) -> None:
        """Kill every worker actor (the Ray runtime itself stays up)."""
        import ray

        for pool in self._pools.values():
            for actor in pool.actors:
                ray.kill(actor, no_restart=True)
        self._pools.clear()


def _answer(ref: Any) -> asyncio.Future[Any]:
    """The call's answer as an asyncio future whose failure never goes unretrieved."""
    future = asyncio.wrap_future(ref.future())
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


def _blocking(tool: Tool) -> bool:
    """Whether the tool runs synchronous code in a thread, which only a process kill stops."""
    from toolbridge.function_tool import FunctionTool

    return isinstance(tool, FunctionTool) and not tool._is_async


def _failed(error: ToolError) -> Invocation:
    return Invocation(ToolResult.error(error), None, error, None)


def _timed_out(tool_name: str, time_limit: float) -> ToolError:
    return ToolError(
        ErrorKind.TIMEOUT,
        f"{tool_name!r} did not finish within {time_limit:g} s and was stopped.",
        "Try a smaller task, or ask the user to raise the time limit.",
    )


def _worker_lost(tool_name: str, attempts: int, retried: bool, exc: Exception | None) -> ToolError:
    again = f" (tried {attempts} times)" if retried else " (not retried: it may have side effects)"
    return ToolError(
        ErrorKind.WORKER_LOST,
        f"the worker running {tool_name!r} died before it answered{again}; it may have "
        f"partly run. Cause: {type(exc).__name__ if exc else 'unknown'}.",
        "Check its effects before calling it again.",
    )
