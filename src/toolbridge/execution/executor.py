"""`ToolExecutor`: run a batch of tool calls with the right concurrency and error semantics.

Consecutive concurrency-safe calls run together; any other call runs alone, in order,
and an ``exclusive`` tool never overlaps another call of the same executor. Every
failure becomes a `ToolOutcome` (never an exception out of `run`), outcomes come back
in call order as `Outcomes`, and `CancelledError` (like `KeyboardInterrupt` and
`SystemExit`) propagates only after every call has an outcome and none is left running.

Per call: prepare (registry) -> loop guard -> approval -> before hooks -> run under the
tool's contract (`ToolRegistry.run_prepared`: time limit, tool hooks, error capture;
the same code `ToolRegistry.execute` uses) -> cap and persist a long result -> loop
guard record -> after hooks and events.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import reprlib
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolbridge.backends import ExecutionBackend, LocalBackend, StartHook
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, PolicyViolation, ToolbridgeError, ToolError
from toolbridge.core.registry import (
    Invocation,
    PreparedCall,
    ToolRegistry,
    describe_exception,
    malformed_result_error,
)
from toolbridge.core.results import MalformedResult, check_result, text_length
from toolbridge.core.tool import Tool, ToolResult, reset_call_owner, set_call_owner
from toolbridge.execution.approval import (
    BY_DECISION,
    ApprovalRequest,
    ApprovalRule,
    Approvals,
    arguments_digest,
    requires_approval_flag,
)
from toolbridge.execution.loop_guard import LoopGuard
from toolbridge.execution.outcomes import (
    EventType,
    Outcomes,
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
from toolbridge.execution.progress import (
    ProgressSink,
    ToolProgress,
    current_progress_sink,
    reset_progress_sink,
    set_progress_sink,
)
from toolbridge.execution.result_store import PAGE_METADATA_KEY, ResultStore, cap_result
from toolbridge.execution.scheduling import ExclusiveGate
from toolbridge.execution.tracing import call_tracer
from toolbridge.tools.tool_results import attach_pager

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal
    from toolbridge.journal.recorder import CallRecorder, Recording

__all__ = [
    "BeforeCall",
    "EventType",
    "ExecutionPolicy",
    "ExecutorHook",
    "OutcomeStatus",
    "Outcomes",
    "ToolBatch",
    "ToolEvent",
    "ToolExecutor",
    "ToolOutcome",
    "tool_result_messages",
]

logger = logging.getLogger(__name__)

EventListener = Callable[["ToolEvent"], None]

BeforeCall = ToolResult | ToolError | PreparedCall | None
"""What `ExecutorHook.before_call` may return (see there)."""


DEFAULT_MCP_TIMEOUT = 60.0
"""Seconds an MCP tool call may take when neither its server nor the policy sets a limit."""


@dataclass(frozen=True, slots=True)
class ExecutionPolicy:
    """How an executor schedules calls and shapes their results. Defaults are safe.

    A result longer than `max_result_chars` reaches the model as a preview; with
    `persist_results` its full text is saved for the ``read_tool_result`` pager: by
    default in a private per-user folder outside the workspace
    (`ResultStore.for_workspace`), or in `results_dir` (relative: inside the workspace,
    e.g. ``".toolbridge/results"``).

    A call's time limit is its tool's own `Tool.timeout`, else `default_timeout` (see
    `time_limit`). A call to an MCP server's tool, which waits on another process,
    always has one: the server's ``timeout``, else `mcp_timeout`, else `default_timeout`,
    else `DEFAULT_MCP_TIMEOUT` (60 s).
    """

    concurrency: bool = True
    max_concurrency: int | None = None
    default_timeout: float | None = None
    mcp_timeout: float | None = None
    fail_on_tool_error: bool = False
    approval: ApprovalRule = requires_approval_flag
    max_result_chars: int = 30_000
    preview_chars: int = 4_000
    persist_results: bool = True
    results_dir: str | Path | None = None
    results_max_age: float = 7 * 24 * 3600
    results_max_count: int = 200
    loop_guard: bool = True
    warn_after: int = 2
    block_after: int = 2
    tracing: bool = True

    def time_limit(self, tool: Tool) -> float | None:
        """The time limit of a call to `tool` under this policy (None: no limit)."""
        if tool.timeout is not None:
            return tool.timeout
        if getattr(tool, "mcp_server", None) is None:
            return self.default_timeout
        for limit in (self.mcp_timeout, self.default_timeout):
            if limit is not None:
                return limit
        return DEFAULT_MCP_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1 or None, got {self.max_concurrency}")
        for name in ("default_timeout", "mcp_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 or None, got {value}")
        if self.max_result_chars < 100 or self.preview_chars < 1:
            raise ValueError("max_result_chars must be >= 100 and preview_chars >= 1")


class _Mode(enum.Enum):
    TOGETHER = "together"
    IN_ORDER = "in_order"
    EXCLUSIVE = "exclusive"


class ExecutorHook:
    """Executor-level hooks; override what you need. A failing hook is logged and ignored.

    Hooks steer calls by what they return (None changes nothing):

    - `before_call` runs after the loop guard and approval, just before the tool. It may
      return a `ToolError` to refuse the call with it, a `ToolResult` to answer the call
      without running the tool (a cache, a dry run), or a `PreparedCall` of the same
      tool, from ``registry.prepare_call``, to run with other (validated) arguments;
      such a call passes the loop guard and approval again. Raising a `PolicyViolation`
      refuses the call too, so a guard can be a hook.
    - `after_call` sees every outcome and may return a `ToolResult` to send instead (to
      redact a secret, say); an ok/error status follows the new result's `is_error`.
    - `on_error` sees every outcome whose status is error, after the `after_call` hooks.
    """

    async def before_call(self, call: ToolCallRequest, prepared: PreparedCall) -> BeforeCall:
        """Called just before a prepared call runs; see the class for what it may return."""
        return None

    async def after_call(self, outcome: ToolOutcome) -> ToolResult | None:
        """Called with every outcome, success or not; may return a replacement result."""
        return None

    async def on_error(self, outcome: ToolOutcome) -> None:
        """Called with every outcome whose status is error."""


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
        except _Stopped as stop:
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
    `backend` decides where prepared calls run (`toolbridge.backends`; default: here), and
    `journal` (`toolbridge.journal`) records every call so none is lost or run twice.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        policy: ExecutionPolicy | None = None,
        *,
        hooks: Iterable[ExecutorHook] = (),
        listeners: Iterable[EventListener] = (),
        tracer_provider: Any = None,
        backend: ExecutionBackend | None = None,
        journal: CallJournal | CallRecorder | None = None,
    ) -> None:
        self.registry = registry
        # Never lost, never run twice: every call is claimed in the journal first.
        self._recorder = _recorder(journal, registry.context.session)
        # Where prepared, approved calls run: this process unless a backend says otherwise.
        backend = backend or LocalBackend()
        self._invoke = backend.bind(registry)
        # Calls it may hold before their tool starts (a busy worker): it says when they do.
        self._defers_start = bool(getattr(backend, "defers_start", False))
        self.policy = policy = policy or ExecutionPolicy()
        self.approvals = Approvals()
        self.retries = Approvals()  # of calls a crash interrupted (`ApprovalRequest.retry`)
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
        self.results = self._result_store() if policy.persist_results else None
        if self.results is not None:
            attach_pager(registry, self.results)  # the notice names it: it must be callable

    def _result_store(self) -> ResultStore:
        """Where long results are saved (see `ExecutionPolicy`)."""
        ctx, policy = self.registry.context, self.policy
        options: dict[str, Any] = {
            "max_age": policy.results_max_age,
            "max_count": policy.results_max_count,
        }
        if policy.results_dir is None:
            return ResultStore.for_workspace(ctx.workspace, ctx.session, **options)
        folder = Path(policy.results_dir)
        if not folder.is_absolute():
            folder = ctx.workspace / folder
            return ResultStore(folder, ctx.session, boundary=ctx.workspace, **options)
        return ResultStore(folder, ctx.session, **options)

    # --- public API ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """End what this executor's calls left running (exec sessions and their sandboxes).

        ``async with ToolExecutor(...) as executor:`` calls it on the way out. The
        executor stays usable; a later call starts afresh.
        """
        for tool in list(self.registry):
            await tool.release(self)

    async def __aenter__(self) -> ToolExecutor:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def batch(self, calls: Sequence[ToolCallRequest]) -> ToolBatch:
        """A batch to `run()` or `stream()`; it keeps finished outcomes if cancelled."""
        return ToolBatch(self, list(calls), self.listeners)

    async def run(
        self, calls: Sequence[ToolCallRequest], *, into: Outcomes | None = None
    ) -> Outcomes:
        """Run `calls`; one outcome per call, in call order, as `Outcomes` (a list).

        Raises only `CancelledError`, `KeyboardInterrupt` and `SystemExit`. To keep the
        finished outcomes when the run is stopped, pass your own ``into=Outcomes()``: it
        is the object returned, and it holds an outcome for every call (unfinished ones
        `CANCELLED`) when the exception reaches you. `Outcomes.fatal` is the failure that
        stopped a `fail_on_tool_error` run; `Outcomes.pending` the calls to approve.
        """
        return await self.batch(calls).run(into=into)

    def stream(self, calls: Sequence[ToolCallRequest]) -> AsyncIterator[ToolEvent]:
        """Run `calls`, yielding a `ToolEvent` as each call starts and finishes."""
        return self.batch(calls).stream()

    def approve(self, request: ApprovalRequest | ToolOutcome, *, by: str = BY_DECISION) -> None:
        """Approve a pending call; it runs when sent again with the same arguments.

        For an `interrupted` call (its request has ``retry=True``) this approves one retry:
        sent again with the same arguments, it runs once more despite the journal. `by`
        (who approved: ``"user:alice"``, ``"hook:audit"`` ...) goes into the journal.
        """
        request = _request_of(request)
        (self.retries if request.retry else self.approvals).approve(request, by=by)

    def deny(self, request: ApprovalRequest | ToolOutcome, reason: str = "") -> None:
        """Deny a pending call; sent again, it fails with `approval_denied` and `reason`.

        For an `interrupted` call: it is not retried; its interrupted error comes back.
        """
        request = _request_of(request)
        (self.retries if request.retry else self.approvals).deny(request, reason)

    # --- the batch ------------------------------------------------------------------------

    async def _run_batch(self, batch: ToolBatch) -> None:
        """Plan the batch into runs, then run them in order, each under the gate once.

        A run is consecutive concurrency-safe calls (run together), consecutive other
        calls (one after another), or one exclusive call (alone in the executor).
        """
        runs: list[tuple[_Mode, list[tuple[int, PreparedCall]]]] = []
        concurrency = self.policy.concurrency
        first_of: dict[str, int] = {}  # call id -> index of the call that has it
        for index, call in enumerate(batch.calls):
            try:
                first = first_of.setdefault(call.id, index)
            except TypeError:  # a list or an object from a hostile payload: no id at all
                error = invalid_id_error(call.id)
                await self._refuse(batch, index, failed_outcome(call, error, ()), call.arguments)
                continue
            if first != index:  # its result could be taken for the other's: never run
                error = duplicate_id_error(call.id, first, batch.calls[first].name)
                await self._refuse(batch, index, failed_outcome(call, error, ()), call.arguments)
                continue
            prepared = self._admit(call)
            if isinstance(prepared, ToolOutcome):
                await self._refuse(batch, index, prepared, call.arguments)
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
                    await _together([self._execute(batch, i, p) for i, p in run])
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
        try:
            prepared = self.registry.prepare_call(call.name, call.arguments)
        except Exception as exc:  # a bug met on hostile arguments still settles this call only
            logger.exception("preparing call %r failed", call.id)
            error = ToolError(
                ErrorKind.INVALID_ARGUMENTS,
                f"the arguments could not be checked ({type(exc).__name__}); they are not "
                "plain JSON data.",
                "Send the arguments as one JSON object of text, numbers, true/false, null, "
                "arrays and objects.",
            )
            return failed_outcome(call, error, ())
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
        if self._recorder is not None and self.retries.granted(tool.name, digest):
            return None  # an approved retry approves the run; `_begin` uses it up
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
            await self._refuse(batch, index, outcome, prepared.arguments)  # it never ran

    # --- one call -------------------------------------------------------------------------

    async def _execute(  # noqa: PLR0915 - one frame per call: the hot path is not split
        self, batch: ToolBatch, index: int, prepared: PreparedCall
    ) -> None:
        """Run one admitted call and settle its outcome (one coroutine: this is per call).

        Only a stop propagates: `CancelledError`, and `KeyboardInterrupt`/`SystemExit`
        wrapped in `_Stopped` (so that a concurrent group can stop its siblings first).
        Anything else that goes wrong here, even a bug, still becomes an outcome.
        """
        call = batch.calls[index]
        try:
            screened = self._screen(call, prepared)
            if screened is not None and not await self._journal_answers(screened, prepared):
                await self._refuse(batch, index, screened, prepared.arguments)
                return
            answer: ToolResult | None = None
            if self._before:
                steered = await self._steer(call, prepared)
                if isinstance(steered, ToolOutcome):
                    await self._refuse(batch, index, steered, prepared.arguments)
                    return
                if isinstance(steered, ToolResult):
                    answer = steered
                else:
                    prepared = steered
            tool = prepared.tool
            assert tool is not None
            recording: Recording | None = None
            if answer is None and self._recorder is not None:
                begun = await self._begin(call, prepared)
                if isinstance(begun, ToolOutcome):
                    await self._settle(batch, index, begun)
                    return
                answer, recording = begun
            try:
                time_limit = self.policy.time_limit(tool)
                progress = (
                    set_progress_sink(self._progress_to(batch, call)) if batch.listeners else None
                )
                try:
                    if answer is not None:
                        start = self._started(batch, call)
                        invocation = _answered(tool.name, answer)
                    elif recording is not None and self._defers_start:
                        start = self._started(batch, call)
                        invocation, recording = await self._run_deferred(
                            tool.name, call.id, prepared, time_limit, recording
                        )
                    elif self._limit is not None:
                        async with self._limit:
                            # Claimed queued: running in the journal only once it starts.
                            unrecorded = await self._start_recording(recording)
                            start = self._started(batch, call)
                            if unrecorded is not None:
                                invocation = _answered(tool.name, ToolResult.error(unrecorded))
                                # It never started: left queued (not finished with this
                                # error), so it runs once the journal can record it.
                                if recording is not None:
                                    await self._abandon(recording)
                                recording = None
                            else:
                                invocation = await self._run_prepared(
                                    tool.name, call.id, prepared, time_limit
                                )
                    elif self._tracer is None:  # the common case: no extra frame
                        start = self._started(batch, call)
                        invocation = await self._invoke(
                            prepared, call_id=call.id, time_limit=time_limit
                        )
                    else:
                        start = self._started(batch, call)
                        invocation = await self._run_prepared(
                            tool.name, call.id, prepared, time_limit
                        )
                finally:
                    if progress is not None:
                        reset_progress_sink(progress)
                duration = time.perf_counter() - start
                result = invocation.result
                if PAGE_METADATA_KEY not in result.metadata and (
                    text_length(result) > self.policy.max_result_chars
                ):
                    result = await self._cap(result, call.id)
                outcome = self._outcome(
                    batch, call, prepared, invocation, result=result, start=start, duration=duration
                )
            except BaseException:
                if recording is not None:  # stopped mid-way: it may have partly run
                    await asyncio.shield(self._abandon(recording))
                raise
            if recording is not None:
                await self._record(recording, outcome)
            if self._plain_settle and not batch.listeners:
                batch.outcomes[index] = outcome
            else:
                await self._settle(batch, index, outcome)
        except asyncio.CancelledError:
            raise
        except (KeyboardInterrupt, SystemExit) as exc:
            raise _Stopped(exc) from None
        except BaseException as exc:
            logger.exception("the executor failed on call %r", call.id)
            error = describe_exception(str(call.name), exc)
            batch.outcomes[index] = failed_outcome(call, error, prepared.repairs)

    async def _begin(
        self, call: ToolCallRequest, prepared: PreparedCall
    ) -> ToolOutcome | tuple[ToolResult | None, Recording | None]:
        """Ask the journal about a call: its outcome (refused), or (stored answer, None) for a
        call that ran before, or (None, recording) for one this executor now runs."""
        tool, args = prepared.tool, prepared.arguments or {}
        assert self._recorder is not None and tool is not None
        # A retry decision is used up by the first call with its arguments to get here.
        retry = (
            bool(self.retries)
            and self.retries.take(tool.name, arguments_digest(tool.name, args)) is True
        )
        begun = await self._recorder.begin(
            call.id, tool, args, approval=self._approval_of(prepared), retry_approved=retry,
            # It may wait for a slot (here, or on a worker): running once its tool starts.
            queued=self._limit is not None or self._defers_start,
        )  # fmt: skip
        if isinstance(begun, ToolError):
            outcome = failed_outcome(call, begun, prepared.repairs)
        elif isinstance(begun, ToolResult):
            if begun.error_kind is not ErrorKind.INTERRUPTED:
                return begun, None  # it ran before: the model gets what it got then
            error = ToolError(ErrorKind.INTERRUPTED, begun.text)
            outcome = failed_outcome(call, error, prepared.repairs)
            outcome.result = begun  # as stored, marked replayed
        else:
            return None, begun
        if outcome.kind is ErrorKind.INTERRUPTED:  # the user may approve a retry
            digest = arguments_digest(tool.name, args)
            outcome.approval = ApprovalRequest(call.id, tool.name, args, digest, retry=True)
        return outcome

    async def _start_recording(self, recording: Recording | None) -> ToolError | None:
        """Tell the journal a queued call's tool starts now; the error that answers the
        call instead when the journal cannot record it."""
        if recording is None or not recording.queued:
            return None
        assert self._recorder is not None
        return await self._recorder.start(recording)

    async def _run_deferred(
        self,
        tool_name: str,
        call_id: str,
        prepared: PreparedCall,
        time_limit: float | None,
        recording: Recording,
    ) -> tuple[Invocation, Recording | None]:
        """Run a journaled call on a backend that starts it later (on a worker): the journal
        marks it running when the backend says its tool starts. A call whose start the
        journal cannot record never starts: left queued, answered with that error."""
        unrecorded: ToolError | None = None

        async def on_start() -> ToolError | None:
            nonlocal unrecorded
            unrecorded = await self._start_recording(recording)
            return unrecorded

        async with self._limit or contextlib.nullcontext():
            invocation = await self._run_prepared(
                tool_name, call_id, prepared, time_limit, on_start=on_start
            )
        if unrecorded is None:
            return invocation, recording
        await self._abandon(recording)
        return _answered(tool_name, ToolResult.error(unrecorded)), None

    async def _refuse(
        self, batch: ToolBatch, index: int, outcome: ToolOutcome, arguments: Any
    ) -> None:
        """Settle a call refused before it ran, recorded first in the journal (the audit
        trail has every call; a refusal is never claimed: it did not run)."""
        if self._recorder is not None:
            call = outcome.call
            await self._recorder.refuse(call.id, str(call.name), arguments, outcome.result)
        await self._settle(batch, index, outcome)

    async def _journal_answers(self, screened: ToolOutcome, prepared: PreparedCall) -> bool:
        """Whether a call waiting for approval is one the journal will answer: it does not
        run (its outcome replays, or, interrupted, only its retry is asked), so there is
        nothing to approve and the user is not asked twice."""
        if self._recorder is None or screened.status is not OutcomeStatus.PENDING_APPROVAL:
            return False
        assert prepared.tool is not None
        return await self._recorder.answers(
            screened.call.id, prepared.tool, prepared.arguments or {}
        )

    def _approval_of(self, prepared: PreparedCall) -> dict[str, Any] | None:
        """What let the call run, for the journal: the approval it needed (or the approved
        retry), bound to the arguments' digest, with who gave it; None when none was needed."""
        tool, args = prepared.tool, prepared.arguments or {}
        assert tool is not None
        needed = self.policy.approval(tool, args)
        if not needed and not self.retries.has_taken():  # the common case: no digest to make
            return None
        digest = arguments_digest(tool.name, args)
        by = self.retries.taken_by(tool.name, digest)  # an approved retry approves the run
        if by is None:
            if not needed:
                return None
            by = self.approvals.taken_by(tool.name, digest) or BY_DECISION
        return {"approved": True, "digest": digest, "by": by}

    async def _record(self, recording: Recording, outcome: ToolOutcome) -> None:
        """Store the outcome before anyone sees it; a journal failure is said, not hidden."""
        assert self._recorder is not None
        try:
            await self._recorder.finish(recording, outcome.result)
        except ToolbridgeError as exc:  # a JournalError: the disk is full, say
            from toolbridge.journal.recorder import JOURNAL_METADATA_KEY

            logger.error("call %r ran but was not journaled: %s", outcome.call.id, exc)
            outcome.result.metadata[JOURNAL_METADATA_KEY] = {"recorded": False, "error": str(exc)}

    async def _abandon(self, recording: Recording) -> None:
        assert self._recorder is not None
        try:
            await self._recorder.abandon(recording)
        except ToolbridgeError as exc:
            logger.error("could not mark an interrupted call in the journal: %s", exc)

    async def _steer(
        self, call: ToolCallRequest, prepared: PreparedCall
    ) -> PreparedCall | ToolResult | ToolOutcome:
        """Ask the `before_call` hooks: the call to run, an answer, or the outcome that
        settles it (a refusal, or the screening of rewritten arguments)."""
        for hook in self._before:
            verdict = await _before_hook(hook, call, prepared)
            if verdict is None:
                continue
            if isinstance(verdict, ToolError):
                return failed_outcome(call, verdict, prepared.repairs)
            if isinstance(verdict, ToolResult):
                return verdict
            prepared = verdict  # other arguments: screened again, as a new call would be
            screened = self._screen(call, prepared)
            if screened is not None:
                return screened
        return prepared

    def _outcome(
        self,
        batch: ToolBatch,
        call: ToolCallRequest,
        prepared: PreparedCall,
        invocation: Invocation,
        *,
        result: ToolResult,
        start: float,
        duration: float,
    ) -> ToolOutcome:
        """The outcome of a call that ran (or was answered), after the loop guard learnt
        from it; `result` is the invocation's result, capped."""
        error = invocation.error
        if result.is_error and error is None:  # the tool returned an error result itself
            error = ToolError(result.error_kind or ErrorKind.EXECUTION_ERROR, result.text)
        guard = self.loop_guard
        if guard is not None:
            exc = invocation.exception
            target = exc.target if isinstance(exc, PolicyViolation) else None
            tool_name = prepared.tool.name if prepared.tool is not None else str(call.name)
            warning = guard.record(tool_name, prepared.arguments or {}, error, target)
            if warning is not None:
                result = append_note(result, warning)
        return ToolOutcome(
            call,
            OutcomeStatus.ERROR if result.is_error else OutcomeStatus.OK,
            result,
            error,
            invocation.value,
            prepared.repairs,
            batch.wall_clock(start),
            duration,
        )

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
        self,
        tool_name: str,
        call_id: str,
        prepared: PreparedCall,
        time_limit: float | None,
        **start: StartHook,
    ) -> Invocation:
        """`start`: the backend's ``on_start``, when it defers a call's start."""
        if self._tracer is None:
            return await self._invoke(prepared, call_id=call_id, time_limit=time_limit, **start)
        with self._tracer.span(tool_name, call_id) as span:
            invocation = await self._invoke(
                prepared, call_id=call_id, time_limit=time_limit, **start
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
        """Record `outcome`: after hooks (which may replace its result), fatal marking,
        error hooks, then the finished event."""
        batch.outcomes[index] = outcome
        for hook in self._after:
            replacement = await _safe_hook(hook.after_call, outcome)
            if isinstance(replacement, ToolResult):
                _replace_result(outcome, replacement, hook)
        failed = outcome.status is OutcomeStatus.ERROR
        if failed and self.policy.fail_on_tool_error and index < batch.fatal_index:
            if batch.fatal is not None:
                batch.fatal.fatal = False  # an earlier call failed later: it is the first
            outcome.fatal = True
            batch.fatal, batch.fatal_index = outcome, index
        if failed:
            for hook in self._on_error:
                await _safe_hook(hook.on_error, outcome)
        if batch.listeners:
            self._emit(batch.listeners, finished_event(outcome))

    def _emit(self, listeners: list[EventListener], event: ToolEvent) -> None:
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("tool event listener %r failed", listener)


# --- helpers ---------------------------------------------------------------------------


def _recorder(journal: CallJournal | CallRecorder | None, session: str) -> CallRecorder | None:
    if journal is None:
        return None
    from toolbridge.journal.recorder import CallRecorder

    return journal if isinstance(journal, CallRecorder) else CallRecorder(journal, session)


def _overrides(hook: ExecutorHook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(ExecutorHook, name)


async def _safe_hook(method: Callable[[ToolOutcome], Awaitable[Any]], outcome: ToolOutcome) -> Any:
    try:
        return await method(outcome)
    except Exception:
        logger.exception("executor hook %r failed for call %r", method, outcome.call.id)
        return None


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


async def _before_hook(
    hook: ExecutorHook, call: ToolCallRequest, prepared: PreparedCall
) -> ToolResult | ToolError | PreparedCall | None:
    """What `hook.before_call` decided, checked: a bad answer refuses the call (fail closed)."""
    tool = prepared.tool
    assert tool is not None
    try:
        verdict = await hook.before_call(call, prepared)
    except PolicyViolation as exc:
        return describe_exception(tool.name, exc)
    except Exception:
        logger.exception("before_call hook %r failed for call %r", hook, call.id)
        return None
    if verdict is None or isinstance(verdict, ToolError):
        return verdict
    if isinstance(verdict, ToolResult):
        try:
            return check_result(verdict)
        except MalformedResult as exc:
            return malformed_result_error(tool.name, exc)
    if isinstance(verdict, PreparedCall):
        if verdict.error is not None:
            return verdict.error
        if verdict.tool is tool:
            return verdict
    logger.error(
        "before_call hook %r returned %r for call %r: expected None, a ToolError, a "
        "ToolResult, or a PreparedCall of the same tool; the call is refused",
        hook,
        type(verdict).__name__,
        call.id,
    )
    return ToolError(
        ErrorKind.POLICY_VIOLATION,
        f"the call to {tool.name!r} was refused by a check that could not decide.",
        "Tell the user; do not repeat the call.",
    )


def _answered(tool_name: str, result: ToolResult) -> Invocation:
    """A hook's answer as if the tool had returned it (the tool did not run)."""
    error = None
    if result.is_error:
        error = ToolError(result.error_kind or ErrorKind.EXECUTION_ERROR, result.text)
    return Invocation(result, None, error, None)


def _replace_result(outcome: ToolOutcome, result: ToolResult, hook: ExecutorHook) -> None:
    """Put an `after_call` replacement in `outcome`; ok/error follows the new result."""
    try:
        check_result(result)
    except MalformedResult as exc:
        logger.error("after_call hook %r returned a malformed result, ignored: %s", hook, exc)
        return
    outcome.result = result
    if outcome.status not in (OutcomeStatus.OK, OutcomeStatus.ERROR):
        return
    if not result.is_error:
        outcome.status, outcome.error = OutcomeStatus.OK, None
        return
    outcome.status = OutcomeStatus.ERROR
    kind = result.error_kind or ErrorKind.EXECUTION_ERROR
    if outcome.error is None or outcome.error.kind is not kind:
        outcome.error = ToolError(kind, result.text)


class _Stopped(Exception):
    """Carries a `KeyboardInterrupt`/`SystemExit` from a call up to its batch, so that the
    batch stops the other calls of its group before the exception goes on."""

    def __init__(self, reason: BaseException) -> None:
        super().__init__(repr(reason))
        self.reason = reason


async def _together(calls: list[Coroutine[Any, Any, None]]) -> None:
    """Run `calls` concurrently. If one stops the run, cancel the others and wait for them
    before the stop goes on: no call is left running."""
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(call) for call in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        running = [task for task in tasks if not task.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        for task in tasks:  # retrieve every exception: none is reported as lost
            if task.done() and not task.cancelled():
                task.exception()
        raise


def _request_of(item: ApprovalRequest | ToolOutcome) -> ApprovalRequest:
    if isinstance(item, ApprovalRequest):
        return item
    if item.approval is None:
        raise ValueError(f"call {item.call.id!r} is not waiting for approval")
    return item.approval
