"""The per-call path: what happens to one call of a batch, from arguments to outcome.

Prepare (registry) -> loop guard -> approval -> before hooks -> journal claim -> run
under the tool's contract on the backend (`ToolRegistry.run_prepared`: time limit,
tool hooks, error capture; the same code `ToolRegistry.execute` uses) -> cap a long
result -> loop guard record -> journal record -> after hooks, fatal marking and events.
Every failure becomes the call's `ToolOutcome`; only a stop propagates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from toolbridge.backends import CallRunner, StartHook
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, PolicyViolation, ToolError
from toolbridge.core.registry import Invocation, PreparedCall, ToolRegistry, describe_exception
from toolbridge.core.tool import Tool, ToolResult
from toolbridge.core.work_start import AskedOnLoop
from toolbridge.execution.approval import ApprovalRequest, ApprovalRule, Approvals, arguments_digest
from toolbridge.execution.hooks import ExecutorHook, before_call_verdict, overrides, safe_hook
from toolbridge.execution.journaling import Journaling, Undecided
from toolbridge.execution.loop_guard import LoopGuard
from toolbridge.execution.outcomes import (
    EventType,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
    append_note,
    denied_error,
    failed_outcome,
    finished_event,
    pending_outcome,
)
from toolbridge.execution.progress import (
    LoopSink,
    ToolProgress,
    current_progress_sink,
    reset_progress_sink,
    set_progress_sink,
)
from toolbridge.execution.result_shaping import ResultCap, replace_result
from toolbridge.execution.scheduling import Stopped, Together, ToolBatch, emit
from toolbridge.execution.tracing import CallTracer

if TYPE_CHECKING:
    from toolbridge.journal.recorder import CallToBegin, Recording

__all__ = ["CLAIMED_AT_ONCE", "CallPath"]

logger = logging.getLogger(__name__)

CLAIMED_AT_ONCE = 64
"""Calls of a together-run claimed in one request to the journal: their tools start while
the journal writes the next claims (a request of 200 would hold them all back)."""


class CallPath:
    """One executor's per-call path: `admit` prepares a call, `execute` takes it to its
    settled outcome, `refuse` settles one that must not run (see the module).

    The executor builds it from its policy and owns what it is given: `approvals`,
    `retries` and `loop_guard` are the executor's, `limit` caps how many calls run at
    once, `journal` claims and records calls, `cap` shapes long results. `invoke` runs a
    prepared call where the backend says; `defers_start`: it may hold a call before its
    tool starts (a busy worker), and says when it starts.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        invoke: CallRunner,
        *,
        defers_start: bool,
        approval: ApprovalRule,
        time_limit: Callable[[Tool], float | None],
        fail_on_tool_error: bool,
        approvals: Approvals,
        retries: Approvals,
        loop_guard: LoopGuard | None,
        hooks: Iterable[ExecutorHook],
        limit: asyncio.Semaphore | None,
        tracer: CallTracer | None,
        journal: Journaling | None,
        cap: ResultCap,
    ) -> None:
        self.registry = registry
        self._invoke = invoke
        self._defers_start = defers_start
        self._approval = approval
        self._time_limit = time_limit
        self._fail_on_tool_error = fail_on_tool_error
        self.approvals = approvals
        self.retries = retries
        self.loop_guard = loop_guard
        hooks = list(hooks)
        self._before = [h for h in hooks if overrides(h, "before_call")]
        self._after = [h for h in hooks if overrides(h, "after_call")]
        self._on_error = [h for h in hooks if overrides(h, "on_error")]
        self._limit = limit
        self._tracer = tracer
        self._journal = journal
        self._cap = cap
        # Settling is a plain store unless hooks or fail_on_tool_error watch outcomes.
        self._plain_settle = not (fail_on_tool_error or self._after or self._on_error)

    def admit(self, call: ToolCallRequest) -> PreparedCall | ToolOutcome:
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

    async def execute_together(self, batch: ToolBatch, run: list[tuple[int, PreparedCall]]) -> None:
        """Run the calls of `run` at once and settle their outcomes.

        With a journal, and no `before_call` hooks (which may change a call's arguments
        before it is claimed), the calls are screened and claimed before their tasks start,
        `CLAIMED_AT_ONCE` in one request (`_claim_ahead`): a claim each would be a task
        waiting for each answer. The first tools start while the next claims are written.

        With a journal, and nothing that watches outcomes settle (hooks, listeners), each
        call hands its outcome to the journal and ends; the run then waits once for them
        all to be stored and settles them: one wait, not one per call. An outcome is
        still stored before anyone sees it; when the run is stopped, an outcome already
        stored is settled and one not yet stored is cancelled, as when its own call
        waits for it.
        """
        stores: list[_Store] | None = None
        if self._journal is not None and self._plain_settle and not batch.listeners:
            stores = []
        ahead: dict[int, _Ahead] | None = None
        together = Together()
        try:
            try:
                if self._journal is None or self._before:
                    together.start(self.execute(batch, i, p, stores) for i, p in run)
                else:
                    ahead = {}
                    for start in range(0, len(run), CLAIMED_AT_ONCE):
                        part = run[start : start + CLAIMED_AT_ONCE]
                        await self._claim_ahead(batch, part, ahead)
                        together.start(self.execute(batch, i, p, stores, ahead) for i, p in part)
            except BaseException:
                await together.stop()
                raise
            await together.wait()
            for store in stores or ():
                assert self._journal is not None
                storing = store.storing
                if not storing.done():  # waited for so that a stop does not cancel it
                    await asyncio.wait((storing,))
                if storing.cancelled() or storing.exception() is not None:
                    await self._journal.stored(store.recording, store.outcome, storing)
                batch.outcomes[store.index] = store.outcome
        except BaseException as exc:  # stopped: what is stored is settled, the rest cancelled
            if ahead:  # claimed, but stopped before its task began: its tool never started
                await self._let_go_unbegun(ahead)
            unstored = []
            for store in stores or ():
                storing = store.storing
                if not storing.done() or storing.cancelled() or storing.exception() is not None:
                    unstored.append(store)
                elif batch.outcomes[store.index] is None:
                    batch.outcomes[store.index] = store.outcome
            if unstored:
                assert self._journal is not None
                await self._journal.recorder.while_stopping(
                    self._let_go_unstored(unstored), [store.recording.key for store in unstored]
                )
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                # Met in the run's own code (screening a part: an approval rule, a redactor,
                # or where a signal lands), not in a call's task: carried up as a call's
                # stop is (see `execute`), so the batch settles every call before it goes on.
                raise Stopped(exc) from None
            raise

    async def _claim_ahead(
        self, batch: ToolBatch, part: list[tuple[int, PreparedCall]], ahead: dict[int, _Ahead]
    ) -> None:
        """Screen the calls of `part` (loop guard, approval) and claim those that may run
        in one request to the journal; put in `ahead` what each call's `execute` goes on
        from."""
        journal = self._journal
        assert journal is not None
        asked: list[tuple[ToolCallRequest, PreparedCall, CallToBegin]] = []
        places: list[int] = []
        queued_by_all = self._limit is not None or self._defers_start
        for index, prepared in part:
            call = batch.calls[index]
            try:
                screened = self._screen(call, prepared)
                if screened is not None:  # refused, or its approval pending: its task goes on
                    ahead[index] = _Screened(screened)
                    continue
                tool = prepared.tool
                assert tool is not None
                queued = queued_by_all or tool.defers_start
                asked.append((call, prepared, journal.call_to_begin(call, prepared, queued)))
            except Exception as exc:  # even a bug settles this call only, as in `execute`
                logger.exception("the executor failed on call %r", call.id)
                error = describe_exception(str(call.name), exc)
                ahead[index] = failed_outcome(call, error, prepared.repairs)
                continue
            places.append(index)
        if not asked:
            return
        try:
            begun = await journal.begin_many(asked)
        except Exception as exc:  # a bug (the journal's own failures are answers): it
            # settles these calls only, as a bug met in `execute` settles its call
            logger.exception("claiming %d calls failed", len(asked))
            for index, (call, prepared, _) in zip(places, asked, strict=True):
                error = describe_exception(str(call.name), exc)
                ahead[index] = failed_outcome(call, error, prepared.repairs)
            return
        ahead.update(zip(places, begun, strict=True))

    async def _let_go_unbegun(self, ahead: dict[int, _Ahead]) -> None:
        """Let go of the calls claimed ahead whose tasks never began: a call claimed to run
        is queued again (its tool never started), one taken over as interrupted stays so.
        All at once (`Journaling.let_go_unbegun`): a second stop while one is let go
        leaves none of the others claimed."""
        journal = self._journal
        assert journal is not None
        recordings: list[Recording] = []
        undecided: list[Undecided] = []
        for begun in ahead.values():
            if isinstance(begun, tuple) and begun[1] is not None:
                recordings.append(begun[1])
            elif isinstance(begun, Undecided):
                undecided.append(begun)
        ahead.clear()
        await journal.let_go_unbegun(recordings, undecided)

    async def _let_go_unstored(self, stores: list[_Store]) -> None:
        """A stopped run's outcomes not stored yet: wait for the journal's answer, and let
        go of each call whose outcome it could not store (found interrupted next time, not
        kept busy by this process); the failure is said in the log."""
        journal = self._journal
        assert journal is not None
        await asyncio.wait([store.storing for store in stores])
        for store in stores:
            try:
                await journal.stored(store.recording, store.outcome, store.storing)
            except Exception:  # not a journal's refusal: a bug, said; the other calls go on
                logger.exception("storing the outcome of call %r failed", store.outcome.call.id)

    async def execute(  # noqa: PLR0915 - one frame per call: the hot path is not split
        self,
        batch: ToolBatch,
        index: int,
        prepared: PreparedCall,
        stores: list[_Store] | None = None,
        ahead: dict[int, _Ahead] | None = None,
    ) -> None:
        """Run one admitted call and settle its outcome (one coroutine: this is per call);
        `stores`: where it leaves its outcome on its way into the journal (see
        `execute_together`), instead of waiting for it; `ahead`: where it finds what
        `_claim_ahead` did for it (screened it, and claimed it).

        Only a stop propagates: `CancelledError`, and `KeyboardInterrupt`/`SystemExit`
        wrapped in `Stopped` (so that a concurrent group can stop its siblings first).
        Anything else that goes wrong here, even a bug, still becomes an outcome.
        """
        call = batch.calls[index]
        journal = self._journal
        begun = ahead.pop(index, None) if ahead is not None else None
        slot: asyncio.Semaphore | None = None  # held from before its tool starts (a limit)
        try:
            answer: ToolResult | None = None
            if begun is None or isinstance(begun, _Screened):  # not claimed yet
                screened = self._screen(call, prepared) if begun is None else begun.outcome
                begun = None
                if screened is not None and (
                    journal is None or not await journal.answers(screened, prepared)
                ):
                    await self.refuse(batch, index, screened, prepared.arguments)
                    return
                if self._before:
                    steered = await self._steer(call, prepared)
                    if isinstance(steered, ToolOutcome):
                        await self.refuse(batch, index, steered, prepared.arguments)
                        return
                    if isinstance(steered, ToolResult):
                        answer = steered
                    else:
                        prepared = steered
            tool = prepared.tool
            assert tool is not None
            recording: Recording | None = None
            if begun is None and answer is None and journal is not None:
                begun = await journal.begin(
                    call,
                    prepared,
                    # It may wait for a slot (here, or on a worker): running once its tool starts.
                    queued=self._limit is not None or self._defers_start or tool.defers_start,
                )
            elif isinstance(begun, Undecided):  # claimed ahead, not simply to run: decided here
                assert journal is not None
                begun = await journal.decide(call, prepared, begun)
            if begun is not None:
                if isinstance(begun, ToolOutcome):
                    await self._settle(batch, index, begun)
                    return
                answer, recording = begun
            try:
                if self._limit is not None and answer is None:
                    # Held until its outcome is on its way into the journal: the call that
                    # takes the slot is recorded running after this one finished, never
                    # while it still reads running (a long result is saved first).
                    await self._limit.acquire()
                    slot = self._limit
                time_limit = self._time_limit(tool)
                sink = self._progress_to(batch, call) if batch.listeners else None
                progress = set_progress_sink(sink) if sink is not None else None
                try:
                    if answer is not None:
                        start = self._started(batch, call)
                        invocation = _answered(tool.name, answer)
                    elif (self._defers_start or tool.defers_start) and (
                        recording is not None or batch.listeners
                    ):
                        deferred = _DeferredStart(self, batch, call, recording)
                        try:
                            invocation = await self._run_deferred(
                                tool.name, call.id, prepared, time_limit, deferred
                            )
                        except BaseException:
                            if recording is not None and not deferred.went:  # never started
                                await self._let_go(recording, started=False, after=deferred)
                                recording = None
                            raise
                        start = deferred.start
                        if deferred.let_go:
                            recording = None  # left queued: it never started
                    elif slot is not None:
                        # Claimed queued: running in the journal only once it starts.
                        try:
                            unrecorded = await self._start_recording(recording)
                        except BaseException:
                            if recording is not None:  # stopped before its tool started
                                await self._let_go(recording, started=False)
                                recording = None
                            raise
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
                    if sink is not None and progress is not None:
                        sink.close()
                        reset_progress_sink(progress)
                duration = time.perf_counter() - start
                result = invocation.result
                if self._cap.too_long(result):
                    result = await self._cap.apply(result, call.id)
                outcome = self._outcome(
                    batch, call, prepared, invocation, result=result, start=start, duration=duration
                )
            except BaseException:
                if recording is not None:  # stopped mid-way: it may have partly run
                    await self._let_go(recording, started=True)
                raise
            if recording is not None:
                assert journal is not None
                storing = journal.store(recording, outcome)
                if slot is not None:  # its outcome is on its way: stored before the next start
                    slot.release()
                    slot = None
                if stores is not None:
                    stores.append(_Store(index, recording, outcome, storing))
                    return
                await journal.stored(recording, outcome, storing)
            elif slot is not None:
                slot.release()
                slot = None
            if self._plain_settle and not batch.listeners:
                batch.outcomes[index] = outcome
            else:
                await self._settle(batch, index, outcome)
        except asyncio.CancelledError:
            raise
        except (KeyboardInterrupt, SystemExit) as exc:
            raise Stopped(exc) from None
        except BaseException as exc:
            logger.exception("the executor failed on call %r", call.id)
            error = describe_exception(str(call.name), exc)
            outcome = batch.outcomes[index] = failed_outcome(call, error, prepared.repairs)
            if batch.listeners:  # finished as every call is (emit never raises an Exception)
                emit(batch.listeners, finished_event(outcome))
        finally:
            if slot is not None:
                slot.release()

    async def refuse(
        self, batch: ToolBatch, index: int, outcome: ToolOutcome, arguments: Any
    ) -> None:
        """Settle a call refused before it ran, recorded first in the journal (the audit
        trail has every call; a refusal is never claimed: it did not run)."""
        if self._journal is not None:
            await self._journal.refuse(outcome.call, arguments, outcome.result)
        await self._settle(batch, index, outcome)

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
            needs_approval = self._approval(tool, args)
        except Exception as exc:  # a broken rule refuses the call: fail closed
            logger.exception("the approval rule failed for call %r", call.id)
            error = denied_error(tool.name, f"the approval rule failed ({type(exc).__name__})")
            return failed_outcome(call, error, prepared.repairs)
        if not needs_approval:
            return None
        digest = arguments_digest(tool.name, args)
        if self._journal is not None and self.retries.granted(tool.name, digest):
            return None  # an approved retry approves the run; `Journaling.begin` uses it up
        decision = self.approvals.take(tool.name, digest)
        if decision is None:
            request = ApprovalRequest(call.id, tool.name, args, digest)
            return pending_outcome(call, request, prepared.repairs)
        if decision is not True:
            return failed_outcome(call, denied_error(tool.name, str(decision)), prepared.repairs)
        return None

    async def _steer(
        self, call: ToolCallRequest, prepared: PreparedCall
    ) -> PreparedCall | ToolResult | ToolOutcome:
        """Ask the `before_call` hooks: the call to run, an answer, or the outcome that
        settles it (a refusal, or the screening of rewritten arguments)."""
        for hook in self._before:
            verdict = await before_call_verdict(hook, call, prepared)
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

    async def _start_recording(self, recording: Recording | None) -> ToolError | None:
        """Tell the journal a queued call's tool starts now; the error that answers the
        call instead when the journal cannot record it."""
        if recording is None or not recording.queued:
            return None
        assert self._journal is not None
        return await self._journal.start(recording)

    async def _let_go(
        self, recording: Recording, *, started: bool, after: _DeferredStart | None = None
    ) -> None:
        """Let go of a stopped call in the journal: `started` (it may have partly run), it
        is left interrupted, else queued again (`after` its start being recorded, if any, is
        answered); waited for no longer than the journal's bound
        (`CallRecorder.while_stopping`)."""
        journal = self._journal
        assert journal is not None
        work = journal.abandon(recording) if started else journal.unclaim(recording)
        await journal.recorder.while_stopping(_after(after, work), [recording.key])

    async def _abandon(self, recording: Recording) -> None:
        assert self._journal is not None
        await self._journal.abandon(recording)

    async def _run_deferred(
        self,
        tool_name: str,
        call_id: str,
        prepared: PreparedCall,
        time_limit: float | None,
        deferred: _DeferredStart,
    ) -> Invocation:
        """Run a call that starts later (on a backend's worker, or a tool's worker thread):
        the journal marks it running, and `call_started` comes, when the backend (or the
        tool) says its work starts. A call whose start the journal cannot record never
        starts: left queued, answered with that error."""
        if self._defers_start:
            invocation = await self._run_prepared(
                tool_name, call_id, prepared, time_limit, on_start=deferred
            )
        else:  # the tool defers it: it asks through the call's context
            loop = asyncio.get_running_loop()
            ask = deferred.may_start if deferred.gated else None  # (listeners: no wait)
            with AskedOnLoop(loop, ask, deferred.started):
                invocation = await self._run_prepared(tool_name, call_id, prepared, time_limit)
        await deferred.answered()  # a start still being recorded when the run ended
        if not deferred.let_go:
            return invocation
        assert self._journal is not None and deferred.recording is not None
        if deferred.unrecorded is None:  # its start was recorded as its run ended: never ran
            await self._journal.unclaim(deferred.recording)  # queued again, no start
            return invocation
        await self._abandon(deferred.recording)
        return _answered(tool_name, ToolResult.error(deferred.unrecorded))

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

    def _progress_to(self, batch: ToolBatch, call: ToolCallRequest) -> LoopSink:
        """A sink that turns the call's `report_progress` into `CALL_PROGRESS` events (and
        passes it on to a sink installed around the batch, such as an MCP server's), on
        the loop, between the call's `CALL_STARTED` and its `CALL_FINISHED`."""
        outer = current_progress_sink()

        def sink(progress: ToolProgress) -> None:
            emit(batch.listeners, ToolEvent(EventType.CALL_PROGRESS, call, progress=progress))
            if outer is not None:
                outer(progress)

        return LoopSink(sink)

    def _started(self, batch: ToolBatch, call: ToolCallRequest) -> float:
        """Mark a call as started (it holds its slot now): emit the event, read the clock."""
        if batch.listeners:
            emit(batch.listeners, ToolEvent(EventType.CALL_STARTED, call))
        return time.perf_counter()

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

    async def _settle(self, batch: ToolBatch, index: int, outcome: ToolOutcome) -> None:
        """Record `outcome`: after hooks (which may replace its result), fatal marking,
        error hooks, then the finished event."""
        batch.outcomes[index] = outcome
        for hook in self._after:
            replacement = await safe_hook(hook.after_call, outcome)
            if isinstance(replacement, ToolResult):
                replace_result(outcome, replacement, hook)
        failed = outcome.status is OutcomeStatus.ERROR
        if failed and self._fail_on_tool_error and index < batch.fatal_index:
            if batch.fatal is not None:
                batch.fatal.fatal = False  # an earlier call failed later: it is the first
            outcome.fatal = True
            batch.fatal, batch.fatal_index = outcome, index
        if failed:
            for hook in self._on_error:
                await safe_hook(hook.on_error, outcome)
        if batch.listeners:
            emit(batch.listeners, finished_event(outcome))


@dataclass(slots=True)
class _Screened:
    """A call `_claim_ahead` screened but did not claim: `outcome`, what screening said
    (refused, or its approval pending)."""

    outcome: ToolOutcome


_Ahead: TypeAlias = (
    "_Screened | ToolOutcome | tuple[ToolResult | None, Recording | None] | Undecided"
)


@dataclass(slots=True)  # not frozen: made once per call, and a frozen one costs twice as much
class _Store:
    """The outcome of a call that ran together with others, on its way into the journal."""

    index: int
    recording: Recording
    outcome: ToolOutcome
    storing: asyncio.Future[None]


async def _after(deferred: _DeferredStart | None, work: Awaitable[None]) -> None:
    """`work` once `deferred`'s start being recorded, if any, is answered (the journal then
    writes the two in that order)."""
    if deferred is not None:
        await deferred.answered()
    await work


def _answered(tool_name: str, result: ToolResult) -> Invocation:
    """A hook's answer as if the tool had returned it (the tool did not run)."""
    error = None
    if result.is_error:
        error = ToolError(result.error_kind or ErrorKind.EXECUTION_ERROR, result.text)
    return Invocation(result, None, error, None)


class _DeferredStart:
    """A call's start on a backend that defers it (its `StartHook`): the journal marks it
    running when its worker has a slot for it (`gated`: only a journaled call waits for
    that), and `call_started` comes, with the clock read, when the backend starts it.
    `went`: the backend may have started it (a stop then leaves it interrupted in the
    journal; before that, the call is let go of: queued again, no owner).

    Its run may end (a time limit, a stop) while its start is being recorded, and the
    work then never starts: the call is let go of (`let_go`) only once that write is
    answered (`answered`), so the journal has it queued again without a start, never a
    start next to a text that says it did not run."""

    __slots__ = (
        "asking", "batch", "call", "path", "recorded", "recording", "start", "unrecorded", "went"
    )  # fmt: skip

    def __init__(
        self, path: CallPath, batch: ToolBatch, call: ToolCallRequest, recording: Recording | None
    ) -> None:
        self.path, self.batch, self.call, self.recording = path, batch, call, recording
        self.recorded = False
        self.went = False
        self.unrecorded: ToolError | None = None
        self.asking: asyncio.Future[None] | None = None  # its start being recorded, till done
        self.start = time.perf_counter()  # until it starts: since it was handed over

    @property
    def gated(self) -> bool:
        return self.recording is not None and self.recording.queued

    @property
    def let_go(self) -> bool:
        """Its work never started though its journal row was to say so (once `answered`):
        its start could not be recorded, or was recorded as its run ended."""
        return self.unrecorded is not None or (self.recorded and not self.went)

    async def __call__(self) -> ToolError | None:
        if self.recorded:  # asked again on another worker: its start is in the journal
            return None
        asking = self.asking = asyncio.get_running_loop().create_future()
        try:
            self.unrecorded = await self.path._start_recording(self.recording)
            self.recorded = self.unrecorded is None
        finally:
            asking.set_result(None)
        return self.unrecorded

    async def answered(self) -> None:
        """Wait until a start being recorded (the run ended meanwhile) is answered."""
        if self.asking is not None and not self.asking.done():
            await asyncio.wait((self.asking,))

    async def may_start(self) -> bool:
        """Whether a tool that asks for its start (`WorkStart`) may start: its start is
        recorded."""
        return await self() is None

    def started(self) -> None:
        if not self.went:  # once, even when a dead worker's call starts again elsewhere
            self.went = True
            self.start = self.path._started(self.batch, self.call)
