"""The executor's side of the call journal: never lost, never run twice.

Before a call runs it is claimed in the journal (`Journaling.begin`): a call that ran
before gets its stored answer, an interrupted one an error the user may approve a
retry of. The journal learns when a queued call starts, how it finished, or that it
was stopped mid-way; refusals are recorded for the audit trail, and each record says
which approval (bound to the arguments' digest, and who gave it) let the call run.
The journal package loads only when a journal is given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.errors import ErrorKind, ToolbridgeError, ToolError
from toolbridge.core.registry import PreparedCall
from toolbridge.core.tool import ToolResult
from toolbridge.execution.approval import (
    BY_DECISION,
    ApprovalRequest,
    ApprovalRule,
    Approvals,
    arguments_digest,
)
from toolbridge.execution.outcomes import OutcomeStatus, ToolOutcome, failed_outcome

if TYPE_CHECKING:
    from toolbridge.journal import CallJournal
    from toolbridge.journal.recorder import CallRecorder, CallToBegin, Claimed, Recording

__all__ = ["Journaling", "Undecided", "open_journaling"]

logger = logging.getLogger(__name__)


def open_journaling(
    journal: CallJournal | CallRecorder | None,
    session: str,
    *,
    approval: ApprovalRule,
    approvals: Approvals,
    retries: Approvals,
) -> Journaling | None:
    """The journaling of an executor with `journal` (None: calls are not journaled)."""
    if journal is None:
        return None
    from toolbridge.journal.recorder import CallRecorder

    recorder = journal if isinstance(journal, CallRecorder) else CallRecorder(journal, session)
    return Journaling(recorder, approval=approval, approvals=approvals, retries=retries)


@dataclass(slots=True)
class Undecided:
    """A call `Journaling.begin_many` claimed whose claim did not simply run it (a replay,
    busy, interrupted, a failure): `Journaling.decide` it in its own task."""

    claimed: Claimed


class Journaling:
    """Claims, starts, finishes and abandons an executor's calls in its `CallRecorder`.

    `approval` is the policy's rule, `approvals` and `retries` the executor's decisions:
    they say what let a call run, and an approved retry is used up here.
    """

    def __init__(
        self,
        recorder: CallRecorder,
        *,
        approval: ApprovalRule,
        approvals: Approvals,
        retries: Approvals,
    ) -> None:
        from toolbridge.journal.recorder import CallToBegin, Claimed, OneStop, Recording
        from toolbridge.journal.records import tuple_maker

        # (The journal package loads only with a journal.)
        self._call_type, self._claimed_type = CallToBegin, Claimed
        self._new_call = tuple_maker(CallToBegin)
        self._recording_type = Recording
        self.recorder = recorder
        self.one_stop = OneStop  # around a batch: its stop's journal waits share one bound
        self.approval = approval
        self.approvals = approvals
        self.retries = retries

    async def begin(
        self, call: ToolCallRequest, prepared: PreparedCall, *, queued: bool
    ) -> ToolOutcome | tuple[ToolResult | None, Recording | None]:
        """Ask the journal about a call: its outcome (refused), or (stored answer, None) for a
        call that ran before, or (None, recording) for one this executor now runs.

        `queued`: the call may wait for a slot; it is running once its tool starts."""
        asked = self.call_to_begin(call, prepared, queued)
        begun = await self.recorder.begin(
            call.id,
            asked.tool,
            asked.arguments,
            approval=asked.approval,
            retry_approved=asked.retry_approved,
            queued=queued,
        )
        return self._begun(call, prepared, begun)

    async def begin_many(
        self, calls: Sequence[tuple[ToolCallRequest, PreparedCall, CallToBegin]]
    ) -> list[ToolOutcome | tuple[ToolResult | None, Recording | None] | Undecided]:
        """`begin` each of `calls` (call, prepared, `call_to_begin`), claimed in one request:
        the answers in their order, `Undecided` for a call to `decide` in its own task (see
        `CallRecorder.begin_many`)."""
        begun = await self.recorder.begin_many([asked for _, _, asked in calls])
        recording, claimed = self._recording_type, self._claimed_type
        return [
            (None, answer)  # the common case: run it (as `_begun` answers)
            if type(answer) is recording
            else Undecided(answer)
            if isinstance(answer, claimed)
            else self._begun(call, prepared, answer)
            for (call, prepared, _), answer in zip(calls, begun, strict=True)
        ]

    async def decide(
        self, call: ToolCallRequest, prepared: PreparedCall, undecided: Undecided
    ) -> ToolOutcome | tuple[ToolResult | None, Recording | None]:
        """`begin`'s answer for a call `begin_many` left undecided."""
        return self._begun(call, prepared, await self.recorder.decide(undecided.claimed))

    async def let_go_unbegun(
        self, recordings: Sequence[Recording], undecided: Sequence[Undecided]
    ) -> None:
        """Let go of calls `begin_many` claimed whose run stopped before their tasks began:
        each claimed to run queued again (its tool never started), each taken over as
        interrupted left so. All are let go at once, in one wait bounded as a stop's
        (`CallRecorder.while_stopping`): a second stop ends the wait, not the letting go,
        so no call is left claimed by a process that will not run it."""
        recorder = self.recorder
        taken = [(u, key) for u in undecided if (key := recorder.taken_over(u.claimed))]
        keys = [recording.key for recording in recordings] + [key for _, key in taken]
        if not keys:
            return
        work = [self.unclaim(recording) for recording in recordings]
        work += [self._let_go_undecided(u) for u, _ in taken]
        await recorder.while_stopping(_all(work), keys)

    async def _let_go_undecided(self, undecided: Undecided) -> None:
        claimed = undecided.claimed
        try:
            await self.recorder.let_go_undecided(claimed)
        except ToolbridgeError as exc:
            logger.error(
                "could not let go of call %r in the journal: %s", claimed.call.call_id, exc
            )

    def call_to_begin(
        self, call: ToolCallRequest, prepared: PreparedCall, queued: bool
    ) -> CallToBegin:
        """What the recorder is asked to begin for a call (`queued`: see `begin`): its
        approval, and whether a retry of it was approved (a retry decision is used up by
        the first call with its arguments to get here)."""
        tool, args = prepared.tool, prepared.arguments or {}
        assert tool is not None
        if self.retries.idle() and not self.approval(tool, args):  # the common case
            return self._new_call((call.id, tool, args, None, False, queued))
        retry = (
            bool(self.retries)
            and self.retries.take(tool.name, arguments_digest(tool.name, args)) is True
        )
        return self._call_type(call.id, tool, args, self.approval_of(prepared), retry, queued)

    def _begun(
        self,
        call: ToolCallRequest,
        prepared: PreparedCall,
        begun: Recording | ToolResult | ToolError,
    ) -> ToolOutcome | tuple[ToolResult | None, Recording | None]:
        """`begin`'s answer from the recorder's."""
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
            tool, args = prepared.tool, prepared.arguments or {}
            assert tool is not None
            digest = arguments_digest(tool.name, args)
            outcome.approval = ApprovalRequest(call.id, tool.name, args, digest, retry=True)
        return outcome

    async def start(self, recording: Recording) -> ToolError | None:
        """Tell the journal a queued call's tool starts now; the error that answers the
        call instead when the journal cannot record it."""
        return await self.recorder.start(recording)

    async def refuse(self, call: ToolCallRequest, arguments: Any, result: ToolResult) -> None:
        """Record a call refused before it ran (the audit trail has every call; a refusal
        is never claimed: it did not run)."""
        await self.recorder.refuse(call.id, str(call.name), arguments, result)

    async def answers(self, screened: ToolOutcome, prepared: PreparedCall) -> bool:
        """Whether a call waiting for approval is one the journal will answer: it does not
        run (its outcome replays, or, interrupted, only its retry is asked), so there is
        nothing to approve and the user is not asked twice."""
        if screened.status is not OutcomeStatus.PENDING_APPROVAL:
            return False
        assert prepared.tool is not None
        return await self.recorder.answers(
            screened.call.id, prepared.tool, prepared.arguments or {}
        )

    def approval_of(self, prepared: PreparedCall) -> dict[str, Any] | None:
        """What let the call run, for the journal: the approval it needed (or the approved
        retry), bound to the arguments' digest, with who gave it; None when none was needed."""
        tool, args = prepared.tool, prepared.arguments or {}
        assert tool is not None
        needed = self.approval(tool, args)
        if not needed and not self.retries.has_taken():  # the common case: no digest to make
            return None
        digest = arguments_digest(tool.name, args)
        by = self.retries.taken_by(tool.name, digest)  # an approved retry approves the run
        if by is None:
            if not needed:
                return None
            by = self.approvals.taken_by(tool.name, digest) or BY_DECISION
        return {"approved": True, "digest": digest, "by": by}

    def store(self, recording: Recording, outcome: ToolOutcome) -> asyncio.Future[None]:
        """Start storing the outcome: wait for it with `stored` before anyone sees it."""
        return self.recorder.finish_soon(recording, outcome.result)

    async def stored(
        self, recording: Recording, outcome: ToolOutcome, storing: asyncio.Future[None]
    ) -> None:
        """Wait until `store` has stored the outcome. A journal failure (the disk is full)
        is said on the outcome and in the log, not hidden, and the call is let go; so is
        one stopped while it waits (that cancels `storing`, so whether the outcome was
        stored is not known: letting go of a call stored meanwhile changes nothing)."""
        try:
            await storing
        except asyncio.CancelledError:
            if storing.cancelled():
                await self.recorder.while_stopping(
                    self.recorder.unfinished(recording), [recording.key]
                )
            raise
        except ToolbridgeError as exc:
            await self.recorder.unfinished(recording)
            from toolbridge.journal.recorder import JOURNAL_METADATA_KEY

            logger.error("call %r ran but was not journaled: %s", outcome.call.id, exc)
            outcome.result.metadata[JOURNAL_METADATA_KEY] = {"recorded": False, "error": str(exc)}

    async def unclaim(self, recording: Recording) -> None:
        """Let go of a call stopped before its tool started: queued again, no owner."""
        try:
            await self.recorder.journal.unclaim(recording.key)
        except ToolbridgeError as exc:
            logger.error(
                "could not let go of call %r in the journal: %s", recording.key.call_id, exc
            )

    async def abandon(self, recording: Recording) -> None:
        """Mark a call stopped mid-way (it may have partly run) or never started."""
        try:
            await self.recorder.abandon(recording)
        except ToolbridgeError as exc:
            logger.error("could not mark an interrupted call in the journal: %s", exc)


async def _all(work: list[Coroutine[Any, Any, None]]) -> None:
    """Run `work` at once and wait for all of it (each logs its own failure)."""
    await asyncio.gather(*work)
