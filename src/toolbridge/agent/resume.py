"""Resuming the last turn of a run: the user's decisions applied to its pending calls,
then the decided calls run with any call of the turn that never got a result.

A call paused for approval runs once approved (bound to the digest of the arguments the
user saw) or is answered with the user's reason; a call interrupted by a crash runs again
only when its retry is approved. In a journaled run, a pending call the journal already
holds passed its approval in an earlier process: it replays, unasked.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from toolbridge.agent.events import AgentEvent
from toolbridge.agent.messages import ToolReturn
from toolbridge.agent.run_context import RunContext
from toolbridge.agent.state import ApprovalDecision, PendingCall, StopReason
from toolbridge.agent.turn_calls import TurnCalls, live
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.tool import ToolResult
from toolbridge.execution.outcomes import ToolOutcome

__all__ = ["BY_JOURNAL", "resume_turn"]


BY_JOURNAL = "journal"
"""Approves a pending call the journal already holds (it replays; nothing is stored)."""


def _retry_denied(pending: PendingCall, reason: str) -> ToolReturn:
    """The answer to an interrupted call whose retry the user denied: it stays interrupted."""
    because = f" ({reason})" if reason else ""
    error = ToolError(
        ErrorKind.INTERRUPTED,
        f"the call to {pending.tool_name!r} was interrupted before it finished (the process "
        f"running it stopped), and it may have partly run; the user chose not to run it "
        f"again{because}.",
        "Check its effects before calling it again.",
    )
    return ToolReturn(pending.call, ToolResult.error(error))


async def resume_turn(
    run: RunContext, decisions: dict[str, ApprovalDecision], turn_calls: TurnCalls
) -> AsyncGenerator[AgentEvent | StopReason, None]:
    """Finish the last turn: apply the decisions to its pending calls, then run the
    decided ones with any call that never got a result (a journaled run that crashed
    mid-turn: what finished replays from the journal).

    A pending call the journal already holds was approved in an earlier process (it
    got that far): it is not asked about again, its journal entry answers it. A denied
    retry answers with the call's interrupted error.
    """
    state = run.state
    pending_ids = {pending.call.id for pending in state.pending}
    unknown = sorted(set(decisions) - pending_ids)
    if unknown:
        raise ValueError(
            f"decisions for calls that are not pending: {unknown}; pending: {sorted(pending_ids)}"
        )
    while True:
        waiting: list[PendingCall] = []
        for pending in state.pending:
            decision = decisions.pop(pending.call.id, None)
            if decision is None and await _journaled(run, pending):
                decision = pending.approve(by=BY_JOURNAL)
            if decision is None:
                waiting.append(pending)
                continue
            if decision.digest != pending.digest:
                raise ValueError(
                    f"the decision for call {pending.call.id!r} was made for other "
                    "arguments (digest mismatch); show the user the pending call again "
                    "and decide anew"
                )
            if decision.approved:
                run.executor.approve(pending.outcome(), by=decision.by)
            elif pending.retry:
                state.settled.append(_retry_denied(pending, decision.reason))
            else:
                run.executor.deny(pending.outcome(), decision.reason)
        state.pending = waiting
        calls = state.unanswered()
        if not calls and waiting:
            yield StopReason.APPROVAL_REQUIRED
            return
        outcomes: list[ToolOutcome] = []
        if calls:
            async with aclosing(live(run, state.turns, calls, outcomes)) as events:
                async for event in events:
                    yield event
        stop = turn_calls.settle(run, calls, outcomes)
        # A call that waits now (it was cut off before its approval was asked for) and
        # that the journal holds is answered from it in another round, unasked.
        if not any([await _journaled(run, pending) for pending in state.pending]):
            if stop is not None:
                yield stop
            return


async def _journaled(run: RunContext, pending: PendingCall) -> bool:
    """Whether the journal holds this (not interrupted) call: it passed its approval in
    an earlier process, so it replays instead of being asked about again."""
    if run.journal is None or pending.retry:
        return False
    from toolbridge.journal import CallKey

    key = CallKey(run.session, pending.call.id, pending.digest)
    return await run.journal.entry(key) is not None
