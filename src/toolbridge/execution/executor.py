"""`ToolExecutor`: run a batch of tool calls with the right concurrency and error semantics.

Consecutive concurrency-safe calls run together; any other call runs alone, in order,
and an ``exclusive`` tool never overlaps another call of the same executor. Every
failure becomes a `ToolOutcome` (never an exception out of `run`), outcomes come back
in call order as `Outcomes`, and `CancelledError` (like `KeyboardInterrupt` and
`SystemExit`) propagates only after every call has an outcome and none is left running.

This module holds the policy and the executor, which wires the stages together and
keeps the decisions a caller makes (approvals, retries). How a batch is grouped and
run is `scheduling`; what happens to one call is `call_path` (with `hooks` and
`journaling`); how a long result is cut and saved is `result_shaping`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolbridge.backends import ExecutionBackend, LocalBackend
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.registry import ToolRegistry
from toolbridge.core.tool import Tool
from toolbridge.execution.approval import (
    BY_DECISION,
    ApprovalRequest,
    ApprovalRule,
    Approvals,
    requires_approval_flag,
)
from toolbridge.execution.call_path import CallPath
from toolbridge.execution.hooks import ExecutorHook
from toolbridge.execution.journaling import open_journaling
from toolbridge.execution.loop_guard import LoopGuard
from toolbridge.execution.outcomes import (
    EventType,
    Outcomes,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
)
from toolbridge.execution.result_shaping import ResultCap, open_results
from toolbridge.execution.scheduling import EventListener, ExclusiveGate, ToolBatch, run_batch
from toolbridge.execution.tracing import call_tracer

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal
    from toolbridge.journal.recorder import CallRecorder

__all__ = [
    "EventType",
    "ExecutionPolicy",
    "ExecutorHook",
    "OutcomeStatus",
    "Outcomes",
    "ToolBatch",
    "ToolEvent",
    "ToolExecutor",
    "ToolOutcome",
]


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
        self.policy = policy = policy or ExecutionPolicy()
        self.approvals = Approvals()
        self.retries = Approvals()  # of calls a crash interrupted (`ApprovalRequest.retry`)
        # Never lost, never run twice: every call is claimed in the journal first.
        journaling = open_journaling(
            journal,
            registry.context.session,
            approval=policy.approval,
            approvals=self.approvals,
            retries=self.retries,
        )
        # Where prepared, approved calls run: this process unless a backend says otherwise.
        backend = backend or LocalBackend()
        invoke = backend.bind(registry)
        self.loop_guard = (
            LoopGuard(warn_after=policy.warn_after, block_after=policy.block_after)
            if policy.loop_guard
            else None
        )
        self.listeners: list[EventListener] = list(listeners)
        self._gate = ExclusiveGate()
        self.results = (
            open_results(
                registry,
                policy.results_dir,
                max_age=policy.results_max_age,
                max_count=policy.results_max_count,
            )
            if policy.persist_results
            else None
        )
        self._one_stop = journaling.one_stop if journaling is not None else None
        self._calls = CallPath(
            registry,
            invoke,
            # Calls it may hold before their tool starts (a busy worker): it says when they do.
            defers_start=bool(getattr(backend, "defers_start", False)),
            approval=policy.approval,
            time_limit=policy.time_limit,
            fail_on_tool_error=policy.fail_on_tool_error,
            approvals=self.approvals,
            retries=self.retries,
            loop_guard=self.loop_guard,
            hooks=hooks,
            limit=asyncio.Semaphore(policy.max_concurrency) if policy.max_concurrency else None,
            tracer=call_tracer(tracer_provider) if policy.tracing else None,
            journal=journaling,
            cap=ResultCap(policy.max_result_chars, policy.preview_chars, self.results),
        )

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

    async def _run_batch(self, batch: ToolBatch) -> None:
        """Run `batch` (see `scheduling.run_batch`); `ToolBatch.run` calls it. A stop of the
        batch is one stop for the journal: the waits it passes through (its calls', then
        its outcomes') share one `close_limit` (`OneStop`)."""
        run = run_batch(batch, self._calls, self._gate, concurrency=self.policy.concurrency)
        if self._one_stop is None:
            await run
            return
        with self._one_stop():
            await run


def _request_of(item: ApprovalRequest | ToolOutcome) -> ApprovalRequest:
    if isinstance(item, ApprovalRequest):
        return item
    if item.approval is None:
        raise ValueError(f"call {item.call.id!r} is not waiting for approval")
    return item.approval
