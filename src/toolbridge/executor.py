"""`ToolExecutor`: run a batch of tool calls with the right concurrency and error semantics.

Consecutive concurrency-safe calls run together; any other call runs alone, in order,
and an ``exclusive`` tool never overlaps another call of the same executor. Every
failure becomes a `ToolOutcome` (never an exception out of `run`), outcomes come back
in call order, and `CancelledError` always propagates after the finished outcomes are
kept on the `ToolBatch`.

Per call: prepare (registry) -> loop guard -> approval -> before hooks -> run with
the time limit (registry) -> cap and persist a long result -> loop guard record ->
after hooks and events.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge.approval import (
    ApprovalRequest,
    ApprovalRule,
    Approvals,
    arguments_digest,
    requires_approval_flag,
)
from toolbridge.calls import ToolCallRequest
from toolbridge.errors import ErrorKind, PolicyViolation, ToolError
from toolbridge.loop_guard import LoopGuard
from toolbridge.outcomes import (
    EventType,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
    append_note,
    denied_error,
    failed_outcome,
    finished_event,
    pending_outcome,
    tool_result_messages,
)
from toolbridge.progress import (
    ProgressSink,
    ToolProgress,
    current_progress_sink,
    reset_progress_sink,
    set_progress_sink,
)
from toolbridge.registry import Invocation, PreparedCall, ToolRegistry, describe_exception
from toolbridge.results import PAGE_METADATA_KEY, ResultStore, cap_result, text_length
from toolbridge.scheduling import ExclusiveGate
from toolbridge.tool import ToolResult
from toolbridge.tracing import call_tracer

__all__ = [
    "EventType",
    "ExecutionPolicy",
    "ExecutorHook",
    "OutcomeStatus",
    "ToolBatch",
    "ToolEvent",
    "ToolExecutor",
    "ToolOutcome",
    "tool_result_messages",
]

logger = logging.getLogger(__name__)

EventListener = Callable[["ToolEvent"], None]


@dataclass(frozen=True, slots=True)
class ExecutionPolicy:
    """How an executor schedules calls and shapes their results. Defaults are safe."""

    concurrency: bool = True
    max_concurrency: int | None = None
    default_timeout: float | None = None
    fail_on_tool_error: bool = False
    approval: ApprovalRule = requires_approval_flag
    max_result_chars: int = 30_000
    preview_chars: int = 4_000
    persist_results: bool = True
    results_max_age: float = 7 * 24 * 3600
    results_max_count: int = 200
    loop_guard: bool = True
    warn_after: int = 2
    block_after: int = 2
    tracing: bool = True

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1 or None, got {self.max_concurrency}")
        if self.default_timeout is not None and self.default_timeout <= 0:
            raise ValueError(f"default_timeout must be > 0 or None, got {self.default_timeout}")
        if self.max_result_chars < 100 or self.preview_chars < 1:
            raise ValueError("max_result_chars must be >= 100 and preview_chars >= 1")


class _Mode(enum.Enum):
    TOGETHER = "together"
    IN_ORDER = "in_order"
    EXCLUSIVE = "exclusive"


class ExecutorHook:
    """Executor-level hooks; override what you need. A failing hook is logged and ignored.

    The one exception: a `PolicyViolation` raised by `before_call` refuses the call with
    that violation, so a guard can be a hook.
    """

    async def before_call(self, call: ToolCallRequest, prepared: PreparedCall) -> None:
        """Called just before a prepared call runs."""

    async def after_call(self, outcome: ToolOutcome) -> None:
        """Called with every outcome, success or not."""

    async def on_error(self, outcome: ToolOutcome) -> None:
        """Called with every outcome whose status is not ok or pending approval."""


@dataclass(slots=True)
class ToolBatch:
    """One batch in flight. `outcomes` fills as calls finish; after a cancel it is complete.

    Calls that had not finished when the batch was cancelled get a `CANCELLED` outcome,
    so every call id can still be answered.
    """

    executor: ToolExecutor
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

    async def run(self) -> list[ToolOutcome]:
        """Run every call; return the outcomes in call order."""
        try:
            await self.executor._run_batch(self)
        except asyncio.CancelledError:
            self._cancel_rest()
            raise
        return self.finished

    async def stream(self) -> AsyncIterator[ToolEvent]:
        """Run the batch, yielding events as calls start and finish."""
        queue: asyncio.Queue[ToolEvent | None] = asyncio.Queue()
        self.listeners = [*self.listeners, queue.put_nowait]
        task = asyncio.create_task(self.run())
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
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
                    self.executor._emit(self.listeners, finished_event(cancelled))


class ToolExecutor:
    """Runs batches of calls against one registry under one `ExecutionPolicy`.

    Each executor owns its approvals, loop guard, concurrency limit and result store;
    nothing is shared between two executors. `hooks` see every call, `listeners` get
    every `ToolEvent`, and `tracer_provider` (OpenTelemetry) defaults to the global one.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        policy: ExecutionPolicy | None = None,
        *,
        hooks: Iterable[ExecutorHook] = (),
        listeners: Iterable[EventListener] = (),
        tracer_provider: Any = None,
    ) -> None:
        self.registry = registry
        self.policy = policy = policy or ExecutionPolicy()
        self.approvals = Approvals()
        self.loop_guard = (
            LoopGuard(warn_after=policy.warn_after, block_after=policy.block_after)
            if policy.loop_guard
            else None
        )
        self.listeners: list[EventListener] = list(listeners)
        hooks = list(hooks)
        self._before = [h for h in hooks if _overrides(h, "before_call")]
        self._after = [h for h in hooks if _overrides(h, "after_call")]
        self._on_error = [h for h in hooks if _overrides(h, "on_error")]
        self._limit = asyncio.Semaphore(policy.max_concurrency) if policy.max_concurrency else None
        self._gate = ExclusiveGate()
        self._tracer = call_tracer(tracer_provider) if policy.tracing else None
        # Settling is a plain store unless hooks or fail_on_tool_error watch outcomes.
        self._plain_settle = not (policy.fail_on_tool_error or self._after or self._on_error)
        ctx = registry.context
        self.results = (
            ResultStore(
                ctx.workspace,
                ctx.session,
                max_age=policy.results_max_age,
                max_count=policy.results_max_count,
            )
            if policy.persist_results
            else None
        )

    # --- public API ---------------------------------------------------------------------

    def batch(self, calls: Sequence[ToolCallRequest]) -> ToolBatch:
        """A batch to `run()` or `stream()`; it keeps finished outcomes if cancelled."""
        return ToolBatch(self, list(calls), self.listeners)

    async def run(self, calls: Sequence[ToolCallRequest]) -> list[ToolOutcome]:
        """Run `calls`; one outcome per call, in call order. Raises only `CancelledError`."""
        return await self.batch(calls).run()

    def stream(self, calls: Sequence[ToolCallRequest]) -> AsyncIterator[ToolEvent]:
        """Run `calls`, yielding a `ToolEvent` as each call starts and finishes."""
        return self.batch(calls).stream()

    def approve(self, request: ApprovalRequest | ToolOutcome) -> None:
        """Approve a pending call; it runs when sent again with the same arguments."""
        self.approvals.approve(_request_of(request))

    def deny(self, request: ApprovalRequest | ToolOutcome, reason: str = "") -> None:
        """Deny a pending call; sent again, it fails with `approval_denied` and `reason`."""
        self.approvals.deny(_request_of(request), reason)

    # --- the batch ------------------------------------------------------------------------

    async def _run_batch(self, batch: ToolBatch) -> None:
        """Plan the batch into runs, then run them in order, each under the gate once.

        A run is consecutive concurrency-safe calls (run together), consecutive other
        calls (one after another), or one exclusive call (alone in the executor).
        """
        runs: list[tuple[_Mode, list[tuple[int, PreparedCall]]]] = []
        concurrency = self.policy.concurrency
        for index, call in enumerate(batch.calls):
            prepared = self._admit(call)
            if isinstance(prepared, ToolOutcome):
                await self._settle(batch, index, prepared)
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
                await self._skip(batch, run)
                continue
            exclusive = mode is _Mode.EXCLUSIVE
            if not self._gate.try_enter(exclusive):
                await self._gate.acquire(exclusive)
            try:
                if mode is _Mode.TOGETHER and len(run) > 1:
                    await asyncio.gather(*(self._execute(batch, i, p) for i, p in run))
                    continue
                for position, (index, prepared) in enumerate(run):
                    if batch.fatal_index < index:
                        await self._skip(batch, run[position:])
                        break
                    await self._execute(batch, index, prepared)
            finally:
                self._gate.release(exclusive)

    def _admit(self, call: ToolCallRequest) -> PreparedCall | ToolOutcome:
        """Prepare a call: the prepared call to schedule, or the outcome that settles it now."""
        prepared = self.registry.prepare_call(call.name, call.arguments)
        if prepared.error is not None:
            return failed_outcome(call, prepared.error, prepared.repairs)
        return prepared

    def _screen(self, call: ToolCallRequest, prepared: PreparedCall) -> ToolOutcome | None:
        """Just before a call runs: the loop guard and approval. None lets it run.

        Done at run time, not when the batch is planned, so a repeat earlier in the same
        batch counts and an approval is used up only by a call that really runs.
        """
        tool, args = prepared.tool, prepared.arguments
        assert tool is not None and args is not None
        guard = self.loop_guard
        if guard is not None:
            blocked = guard.check(tool.name, args)
            if blocked is not None:
                return failed_outcome(call, blocked, prepared.repairs)
        try:
            needs_approval = self.policy.approval(tool, args)
        except Exception as exc:  # a broken rule refuses the call: fail closed
            logger.exception("the approval rule failed for call %r", call.id)
            error = denied_error(tool.name, f"the approval rule failed ({type(exc).__name__})")
            return failed_outcome(call, error, prepared.repairs)
        if not needs_approval:
            return None
        digest = arguments_digest(tool.name, args)
        decision = self.approvals.take(tool.name, digest)
        if decision is None:
            request = ApprovalRequest(call.id, tool.name, args, digest)
            return pending_outcome(call, request, prepared.repairs)
        if decision is not True:
            return failed_outcome(call, denied_error(tool.name, str(decision)), prepared.repairs)
        return None

    async def _skip(self, batch: ToolBatch, group: list[tuple[int, PreparedCall]]) -> None:
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
            await self._settle(batch, index, outcome)

    # --- one call -------------------------------------------------------------------------

    async def _execute(self, batch: ToolBatch, index: int, prepared: PreparedCall) -> None:
        """Run one admitted call and settle its outcome (one coroutine: this is per call)."""
        call = batch.calls[index]
        tool = prepared.tool
        assert tool is not None
        screened = self._screen(call, prepared)
        if screened is not None:
            await self._settle(batch, index, screened)
            return
        for hook in self._before:
            refused = await _before_hook(hook, call, prepared, tool.name)
            if refused is not None:
                await self._settle(batch, index, failed_outcome(call, refused, prepared.repairs))
                return
        time_limit = tool.timeout if tool.timeout is not None else self.policy.default_timeout
        progress = set_progress_sink(self._progress_to(batch, call)) if batch.listeners else None
        try:
            if self._limit is not None:
                async with self._limit:
                    start = self._started(batch, call)
                    invocation = await self._run_prepared(tool.name, call.id, prepared, time_limit)
            elif self._tracer is None:  # the common case: no extra frame
                start = self._started(batch, call)
                invocation = await self.registry.run_prepared(
                    prepared, call_id=call.id, time_limit=time_limit
                )
            else:
                start = self._started(batch, call)
                invocation = await self._run_prepared(tool.name, call.id, prepared, time_limit)
        finally:
            if progress is not None:
                reset_progress_sink(progress)
        duration = time.perf_counter() - start
        result, error = invocation.result, invocation.error
        if PAGE_METADATA_KEY not in result.metadata and (
            text_length(result) > self.policy.max_result_chars
        ):
            result = await self._cap(result, call.id)
        if result.is_error and error is None:  # the tool returned an error result itself
            error = ToolError(result.error_kind or ErrorKind.EXECUTION_ERROR, result.text)
        guard = self.loop_guard
        if guard is not None:
            exc = invocation.exception
            target = exc.target if isinstance(exc, PolicyViolation) else None
            warning = guard.record(tool.name, prepared.arguments or {}, error, target)
            if warning is not None:
                result = append_note(result, warning)
        outcome = ToolOutcome(
            call,
            OutcomeStatus.ERROR if result.is_error else OutcomeStatus.OK,
            result,
            error,
            invocation.value,
            prepared.repairs,
            batch.wall_clock(start),
            duration,
        )
        if self._plain_settle and not batch.listeners:
            batch.outcomes[index] = outcome
        else:
            await self._settle(batch, index, outcome)

    def _progress_to(self, batch: ToolBatch, call: ToolCallRequest) -> ProgressSink:
        """A sink that turns the call's `report_progress` into `CALL_PROGRESS` events (and
        passes it on to a sink installed around the batch, such as an MCP server's)."""
        outer = current_progress_sink()

        def emit(progress: ToolProgress) -> None:
            self._emit(batch.listeners, ToolEvent(EventType.CALL_PROGRESS, call, progress=progress))
            if outer is not None:
                outer(progress)

        return emit

    def _started(self, batch: ToolBatch, call: ToolCallRequest) -> float:
        """Mark a call as started (it holds its slot now): emit the event, read the clock."""
        if batch.listeners:
            self._emit(batch.listeners, ToolEvent(EventType.CALL_STARTED, call))
        return time.perf_counter()

    async def _run_prepared(
        self, tool_name: str, call_id: str, prepared: PreparedCall, time_limit: float | None
    ) -> Invocation:
        if self._tracer is None:
            return await self.registry.run_prepared(
                prepared, call_id=call_id, time_limit=time_limit
            )
        with self._tracer.span(tool_name, call_id) as span:
            invocation = await self.registry.run_prepared(
                prepared, call_id=call_id, time_limit=time_limit
            )
            if invocation.result.is_error:
                kind = invocation.result.error_kind or ErrorKind.EXECUTION_ERROR
                self._tracer.failed(span, kind, kind.value)
            return invocation

    async def _cap(self, result: ToolResult, call_id: str) -> ToolResult:
        policy = self.policy
        try:
            return await asyncio.to_thread(
                cap_result,
                result,
                call_id=call_id,
                max_chars=policy.max_result_chars,
                store=self.results,
                preview_chars=policy.preview_chars,
            )
        except Exception as exc:  # saving is a convenience: the preview still goes back
            logger.warning("could not save the long result of call %r: %r", call_id, exc)
            return cap_result(
                result,
                call_id=call_id,
                max_chars=policy.max_result_chars,
                store=None,
                preview_chars=policy.preview_chars,
            )

    async def _settle(self, batch: ToolBatch, index: int, outcome: ToolOutcome) -> None:
        """Record `outcome`: fatal marking, hooks, then the finished event."""
        failed = outcome.status is OutcomeStatus.ERROR
        if failed and self.policy.fail_on_tool_error and index < batch.fatal_index:
            if batch.fatal is not None:
                batch.fatal.fatal = False  # an earlier call failed later: it is the first
            outcome.fatal = True
            batch.fatal, batch.fatal_index = outcome, index
        batch.outcomes[index] = outcome
        if self._after or self._on_error:
            await self._after_hooks(outcome, failed)
        if batch.listeners:
            self._emit(batch.listeners, finished_event(outcome))

    async def _after_hooks(self, outcome: ToolOutcome, failed: bool) -> None:
        for hook in self._after:
            await _safe_hook(hook.after_call, outcome)
        if failed:
            for hook in self._on_error:
                await _safe_hook(hook.on_error, outcome)

    def _emit(self, listeners: list[EventListener], event: ToolEvent) -> None:
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("tool event listener %r failed", listener)


# --- helpers ---------------------------------------------------------------------------


def _overrides(hook: ExecutorHook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(ExecutorHook, name)


async def _safe_hook(method: Callable[[ToolOutcome], Any], outcome: ToolOutcome) -> None:
    try:
        await method(outcome)
    except Exception:
        logger.exception("executor hook %r failed for call %r", method, outcome.call.id)


async def _before_hook(
    hook: ExecutorHook, call: ToolCallRequest, prepared: PreparedCall, tool_name: str
) -> ToolError | None:
    try:
        await hook.before_call(call, prepared)
    except PolicyViolation as exc:
        return describe_exception(tool_name, exc)
    except Exception:
        logger.exception("before_call hook %r failed for call %r", hook, call.id)
    return None


def _request_of(item: ApprovalRequest | ToolOutcome) -> ApprovalRequest:
    if isinstance(item, ApprovalRequest):
        return item
    if item.approval is None:
        raise ValueError(f"call {item.call.id!r} is not waiting for approval")
    return item.approval
