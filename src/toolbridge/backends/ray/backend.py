"""`RayBackend`, the caller's entry point: binds to an executor's registry, keeps one pool
of workers per resource shape, hands each call to the dispatcher of its event loop (its
time limit counts from there), starts pools ahead and kills the workers at close."""

from __future__ import annotations

import asyncio
import functools
import itertools
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from toolbridge.backends import CallRunner, StartHook
from toolbridge.backends.ray.calls import Pending
from toolbridge.backends.ray.dispatch import Dispatcher
from toolbridge.backends.ray.errors import bad_resources_error, failed_invocation
from toolbridge.backends.ray.pool import RAY_KEYS, Pool, ray_amount
from toolbridge.backends.ray.source import ToolSource
from toolbridge.backends.ray.wire import CONTROL, Context
from toolbridge.backends.ray.worker import GO_TIMEOUT, Worker
from toolbridge.core.registry import Invocation, PreparedCall, ToolRegistry
from toolbridge.core.tool import Tool
from toolbridge.execution.progress import current_progress_sink


class RayBackend:
    """Runs calls on Ray actors built from `source` (see the package docstring).

    `workers` actors serve tools without resource needs. A tool that declares
    ``ray_resources`` (Ray's own keys: ``num_cpus``, ``num_gpus``, ``memory``, and custom
    resources such as ``{"sandbox": 1}``) runs on its own pool of `workers_per_resource`
    actors placed by Ray where those resources are. `retries`: how many more times a
    read-only or idempotent call (or a journaled one that had not started) is tried on a
    fresh worker after its worker died.
    `max_calls_per_worker`: how many calls one worker runs at once (more wait there, within
    their limits). `start_timeout`: how long a call without a time limit waits for a worker
    to take it. `contexts_per_worker`: how many sessions' registries a worker keeps built
    (the one used longest ago goes first). `go_timeout`: how long a worker holds a slot
    for a journaled call whose caller has not answered its ask to start it (a caller
    that is gone); past it, the call is dropped without starting and its slot freed.
    A setting out of its range (no workers, a negative or NaN time) is a `ValueError`.
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
        go_timeout: float = GO_TIMEOUT,
        address: str | None = None,
    ) -> None:
        import ray

        for name, value, rule, ok, what in (
            ("workers", workers, ">= 1", workers >= 1,
             "how many actors serve the tools without resource needs"),
            ("workers_per_resource", workers_per_resource, ">= 1", workers_per_resource >= 1,
             "how many actors serve each resource shape"),
            ("max_calls_per_worker", max_calls_per_worker, ">= 1", max_calls_per_worker >= 1,
             "how many calls one worker runs at once"),
            ("contexts_per_worker", contexts_per_worker, ">= 1", contexts_per_worker >= 1,
             "how many sessions' tools a worker keeps built"),
            ("retries", retries, ">= 0", retries >= 0,
             "how many more times a call whose worker died is tried"),
            ("grace", grace, ">= 0 seconds", grace >= 0,
             "how long a worker has past a call's limit to answer before it is killed"),
            ("start_timeout", start_timeout, "> 0 seconds", start_timeout > 0,
             "how long a call without a time limit waits for a worker"),
            ("go_timeout", go_timeout, "> 0 seconds", go_timeout > 0,
             "how long a worker waits for a caller's go to start a journaled call (the "
             f"default is {GO_TIMEOUT:g})"),
        ):  # fmt: skip
            if not ok:  # NaN too: no comparison holds for it
                raise ValueError(f"{name} must be {rule}, got {value!r}: it is {what}")

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
        self.go_timeout = go_timeout
        self._remote = ray.remote(concurrency_groups={CONTROL: 2})(Worker)  # type: ignore[call-overload]
        self._pools: dict[tuple[tuple[str, Any], ...], Pool] = {}
        self._batches = itertools.count()
        self._dispatchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Dispatcher] = (
            weakref.WeakKeyDictionary()
        )

    def bind(self, registry: ToolRegistry) -> CallRunner:
        ctx = registry.context
        context = Context(str(ctx.workspace), ctx.session, dict(ctx.config))
        here = functools.partial(registry.run_prepared, approved=True)

        async def run(
            prepared: PreparedCall,
            *,
            call_id: str | None = None,
            time_limit: float | None,
            on_start: StartHook | None = None,
        ) -> Invocation:
            if getattr(prepared.tool, "caller_side", False):  # e.g. the pager: state is here
                if on_start is not None:
                    refusal = await on_start() if on_start.gated else None
                    if refusal is not None:
                        return failed_invocation(refusal)
                    on_start.started()
                return await here(prepared, call_id=call_id, time_limit=time_limit)
            return await self.run(prepared, context, call_id, time_limit, on_start)

        return run

    def start(self, tools: Iterable[Tool] = (), *, timeout: float = 60.0) -> None:
        """Start the workers of `tools` (and those for tools without resource needs) and
        wait until they answer. A call's time limit counts its wait for a worker, so
        starting ahead spares the first calls a cold start. Raises `TimeoutError` (naming
        any resource no node has) when some are not up within `timeout` seconds."""
        import ray

        pools = {id(pool): pool for pool in [self._pool(None), *map(self._checked_pool, tools)]}
        probes = [probe for pool in pools.values() for probe in pool.probes.values()]
        ray.wait(probes, num_returns=len(probes), timeout=timeout)
        late = [pool for pool in pools.values() if len(pool.up()) < len(pool.actors)]
        if late:
            missing = sorted({key for pool in late for key in pool.missing()})
            why = f": no node offers {', '.join(map(repr, missing))}" if missing else ""
            raise TimeoutError(
                f"{len(late)} Ray worker pool(s) did not start in {timeout:g} s{why}"
            )

    def _checked_pool(self, tool: Tool) -> Pool:
        try:
            return self._pool(tool)
        except ValueError as exc:
            raise ValueError(f"tool {tool.name!r} cannot run on Ray: {exc}") from None

    def _pool(self, tool: Tool | None) -> Pool:
        """The workers of `tool`'s resource shape, started on first use; a `ValueError`
        when its ``ray_resources`` ask for an amount that is not one (`ray_amount`)."""
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
            asked = {k: ray_amount(k, v) for k, v in resources.items()}  # (what Ray can hold)
            custom = {k: v for k, v in asked.items() if k not in RAY_KEYS}
            options.update({k: v for k, v in asked.items() if k not in custom})
            if custom:
                options["resources"] = custom
            size = self.workers_per_resource if resources else self.workers
            worker = self._remote.options(**options)
            made = (self.source, self.max_calls_per_worker, self.contexts_per_worker)
            actors = [worker.remote(*made, self.go_timeout) for _ in range(size)]
            pool = self._pools[shape] = Pool(actors, dict(resources))
        return pool

    async def run(
        self,
        prepared: PreparedCall,
        context: Context,
        call_id: str | None,
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
            dispatcher = self._dispatchers[loop] = Dispatcher(self)
        try:
            pool = self._pool(tool)
        except ValueError as exc:  # its ray_resources ask for no amount at all
            return failed_invocation(bad_resources_error(tool.name, str(exc)))
        wait = self.start_timeout if time_limit is None else time_limit
        call = Pending(
            tool, pool, context, arguments, call_id, time_limit,
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
