"""The calls of one model turn: run through the run's executor, their results filed.

`TurnCalls.run` awaits what `eager_tools` started early, runs the rest as one executor
batch and reports each call's `ToolStarted` / `ToolFinished` as it happens (`live`);
`settle` files the outcomes: calls waiting for an approval (or for a retry decision)
pause the run, and once nothing is pending the turn's results join the conversation in
call order, what a ``tool_search`` found joins the run's tools, and a ``final_result``
call may end the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing

from toolbridge.agent.eager import EarlyCalls
from toolbridge.agent.events import AgentEvent, ToolFinished, ToolStarted
from toolbridge.agent.messages import AssistantMessage, ToolResultsMessage, ToolReturn
from toolbridge.agent.run_context import RunContext
from toolbridge.agent.state import PendingCall, StopReason
from toolbridge.agent.turn_output import AnswerCheck
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.tool_search import SEARCH_TOOL_NAME, found_tools
from toolbridge.execution.outcomes import (
    EventType,
    OutcomeStatus,
    ToolEvent,
    ToolOutcome,
    failed_outcome,
)
from toolbridge.execution.scheduling import duplicate_id_error

__all__ = ["TurnCalls", "live"]

logger = logging.getLogger(__name__)


class TurnCalls:
    """Runs a turn's calls and files their outcomes; `searching` (the run has a tool
    search) and `answers` (it has an output type) say what a result may change."""

    def __init__(self, *, searching: bool, answers: AnswerCheck | None) -> None:
        self.searching = searching
        self.answers = answers

    async def run(
        self,
        run: RunContext,
        turn: int,
        calls: Sequence[ToolCallRequest],
        early: EarlyCalls | None = None,
    ) -> AsyncGenerator[AgentEvent | StopReason, None]:
        """Run one turn's calls; append their results, or pause on pending approvals.

        Calls started early (`eager_tools`) are awaited first (their `ToolFinished` as each
        ends), so the rest of the turn starts after them, as within one executor batch.
        """
        state = run.state
        state.tool_calls += len(calls)
        await run.save()  # the turn is durable before its calls run: a crash resumes them
        started: dict[str, ToolOutcome] = {}
        if early is not None:
            try:
                async with aclosing(early.finished(turn)) as finishes:
                    async for finished in finishes:
                        yield finished
            except BaseException:  # the run was closed or cancelled: stop the early calls
                await early.cancel()
                raise
            started = early.outcomes
        # By position: a call sharing the id of a call started early is refused, as the
        # executor refuses one sharing an id within its batch (never the other's result).
        early_at = {}
        for position, call in enumerate(calls):
            outcome = started.get(call.id)
            if outcome is not None and call.id not in early_at and outcome.call == call:
                early_at[call.id] = position
        given: dict[int, ToolOutcome] = {i: started[calls[i].id] for i in early_at.values()}
        rest = []
        for position, call in enumerate(calls):
            if position in given:
                continue
            if call.id in early_at:
                first = early_at[call.id]
                error = duplicate_id_error(call.id, first, calls[first].name)
                given[position] = failed_outcome(call, error, ())
                yield ToolStarted(call, turn)
                yield ToolFinished(given[position], turn)
                continue
            rest.append(call)
        ran: list[ToolOutcome] = []
        if rest:
            async with aclosing(live(run, turn, rest, ran)) as events:
                async for event in events:
                    yield event
        later = iter(ran)
        outcomes = [given[i] if i in given else next(later) for i in range(len(calls))]
        stop = self.settle(run, calls, outcomes)
        if stop is not None:
            yield stop

    def settle(
        self, run: RunContext, calls: Sequence[ToolCallRequest], outcomes: Sequence[ToolOutcome]
    ) -> StopReason | None:
        """File a batch's outcomes: pending ones (waiting for an approval, or interrupted
        ones the user may retry) pause the run, the rest join `settled`; once nothing is
        pending the turn's results go into the conversation in call order."""
        state = run.state
        for outcome in outcomes:
            request = outcome.approval
            if request is not None and (
                outcome.status is OutcomeStatus.PENDING_APPROVAL or request.retry
            ):
                state.pending.append(PendingCall.from_request(outcome.call, request))
            else:
                state.settled.append(ToolReturn(outcome.call, outcome.result))
        if state.pending:
            return StopReason.APPROVAL_REQUIRED
        last = state.conversation[-1]
        assert isinstance(last, AssistantMessage)
        results = _in_call_order(last.calls, state.settled)
        state.conversation.append(ToolResultsMessage(results))
        state.settled = []
        if self.searching:
            for ret in results:  # what a search found is sent from the next request on
                if ret.call.name == SEARCH_TOOL_NAME:
                    new = [n for n in found_tools(ret.result) if n not in state.active_tools]
                    state.active_tools.extend(dict.fromkeys(new))
        if any(outcome.fatal for outcome in outcomes):
            return StopReason.TOOL_ERROR
        if self.answers is not None:
            return self.answers.final_result(run, results)
        return None


async def live(
    run: RunContext, turn: int, calls: Sequence[ToolCallRequest], into: list[ToolOutcome]
) -> AsyncGenerator[AgentEvent, None]:
    """Run `calls` through the executor's event stream: yield `ToolStarted` as each call
    starts and `ToolFinished` as it finishes, then fill `into` with the outcomes in
    call order. A call settled without running (invalid, pending approval) gets its
    `ToolStarted` just before its `ToolFinished`. Closing this generator cancels the
    calls still running.
    """
    batch = run.executor.batch(calls)
    events = aiter(batch.stream())
    started: set[int] = set()  # id() of the call objects already announced
    finished: set[int] = set()
    tracer = run.tracer
    try:
        while True:
            if tracer is not None:
                # The batch's task starts on the first read: it inherits the run's span.
                event = await tracer.within(run.span, lambda: _next(run, events))
                tracer = None
            else:
                event = await _next(run, events)
            if event is None:
                break
            if event.type is EventType.CALL_STARTED:
                started.add(id(event.call))
                yield ToolStarted(event.call, turn)
            elif event.type is EventType.CALL_FINISHED and event.outcome is not None:
                if id(event.call) not in started:
                    started.add(id(event.call))
                    yield ToolStarted(event.call, turn)
                finished.add(id(event.call))
                yield ToolFinished(event.outcome, turn)
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()  # stops the batch: a call still running is cancelled
    if len(batch.finished) < len(calls):  # stopped before its task began (deadline)
        batch._cancel_rest()
    into[:] = batch.finished
    for outcome in into:  # cancelled at the deadline: announced, so every call ends
        if id(outcome.call) not in finished:
            if id(outcome.call) not in started:
                yield ToolStarted(outcome.call, turn)
            yield ToolFinished(outcome, turn)


async def _next(run: RunContext, events: AsyncIterator[ToolEvent]) -> ToolEvent | None:
    """The batch's next event; None at its end, or when the run's deadline passed
    first (the calls still running are then cancelled, when `events` is closed)."""
    remaining = run.remaining()
    if remaining is None:
        return await anext(events, None)
    try:
        return await asyncio.wait_for(anext(events, None), max(remaining, 0))
    except TimeoutError:
        left = run.remaining()
        if left is not None and left <= 0:
            logger.info("run deadline reached while tool calls ran")
            return None
        raise


def _in_call_order(
    calls: Sequence[ToolCallRequest], settled: Sequence[ToolReturn]
) -> tuple[ToolReturn, ...]:
    """Each call's own result, in call order. Matched by call, not only by id: two calls
    sharing an id (the second refused) each keep their own result."""
    by_id: dict[str, list[ToolReturn]] = {}
    for ret in settled:
        by_id.setdefault(ret.call.id, []).append(ret)
    results = []
    for call in calls:
        candidates = by_id.get(call.id)
        if not candidates:
            continue
        match = next((ret for ret in candidates if ret.call == call), candidates[0])
        candidates.remove(match)
        results.append(match)
    return tuple(results)
