"""What the executor hands back: `ToolOutcome` per call in `Outcomes`, `ToolEvent` as calls run.

The provider formats render an outcome through `.call` and `.result` only
(`toolbridge.formats.openai_chat.tool_result_messages` is the OpenAI chat shape of a
finished batch).
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any

from toolbridge.core.calls import Repair, ToolCallRequest
from toolbridge.core.errors import ErrorKind, ToolError
from toolbridge.core.registry import approval_required_error
from toolbridge.core.results import text_length
from toolbridge.core.tool import TextBlock, ToolResult
from toolbridge.execution.approval import ApprovalRequest
from toolbridge.execution.progress import ToolProgress

__all__ = [
    "EventType",
    "OutcomeStatus",
    "Outcomes",
    "ToolEvent",
    "ToolOutcome",
]


class OutcomeStatus(enum.StrEnum):
    """How a call ended. Errors say which kind in `ToolOutcome.error`."""

    OK = "ok"
    ERROR = "error"
    PENDING_APPROVAL = "pending_approval"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class EventType(enum.StrEnum):
    CALL_STARTED = "call_started"
    CALL_FINISHED = "call_finished"
    CALL_PROGRESS = "call_progress"


@dataclass(slots=True)
class ToolOutcome:
    """What became of one call: status, the content for the model, and how it got there.

    `result` is what goes back to the model (error text included); `value` is the typed
    value the tool returned; `error` says what failed and of which `ErrorKind`.
    """

    call: ToolCallRequest
    status: OutcomeStatus
    result: ToolResult
    error: ToolError | None = None
    value: Any = None
    repairs: tuple[Repair, ...] = ()
    started_at: float = 0.0
    duration: float = 0.0
    approval: ApprovalRequest | None = None
    fatal: bool = False

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.OK

    @property
    def kind(self) -> ErrorKind | None:
        return self.error.kind if self.error is not None else None


class Outcomes(list[ToolOutcome]):
    """The outcomes of one batch, one per call, in call order: a plain list, plus the
    two questions every caller asks of a batch.

    `ToolExecutor.run` returns one; pass your own (``into=``) to keep the outcomes when
    the run is cancelled - the same object then holds an outcome for every call.
    """

    __slots__ = ()

    @property
    def fatal(self) -> ToolOutcome | None:
        """The failure that stopped a `fail_on_tool_error` run (later calls are skipped)."""
        return next((outcome for outcome in self if outcome.fatal), None)

    @property
    def pending(self) -> list[ToolOutcome]:
        """The calls waiting for approval: approve or deny each, then run their calls again."""
        return [o for o in self if o.status is OutcomeStatus.PENDING_APPROVAL]


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A call started or finished; `summary()` is the reference design's status line."""

    type: EventType
    call: ToolCallRequest
    status: OutcomeStatus | None = None
    detail: str = ""
    duration: float | None = None
    outcome: ToolOutcome | None = None
    progress: ToolProgress | None = None

    @property
    def name(self) -> str:
        return str(self.call.name)

    def summary(self) -> dict[str, str]:
        status = self.status.value if self.status is not None else "running"
        return {"name": self.name, "status": status, "detail": self.detail}


def failed_outcome(
    call: ToolCallRequest, error: ToolError, repairs: tuple[Repair, ...]
) -> ToolOutcome:
    """An outcome for a call that failed before or instead of running."""
    return ToolOutcome(
        call,
        OutcomeStatus.ERROR,
        ToolResult.error(error),
        error,
        repairs=repairs,
        started_at=time.time(),
    )


def pending_outcome(
    call: ToolCallRequest, request: ApprovalRequest, repairs: tuple[Repair, ...]
) -> ToolOutcome:
    """An outcome for a call that waits for the user's decision.

    Its status is not an error, but its result is the same ``approval_required`` error
    `ToolRegistry.execute` gives, in case it is sent to the model before a decision.
    """
    error = approval_required_error(request.tool_name)
    return ToolOutcome(
        call,
        OutcomeStatus.PENDING_APPROVAL,
        ToolResult.error(error),
        error,
        repairs=repairs,
        started_at=time.time(),
        approval=request,
    )


def denied_error(tool_name: str, reason: str) -> ToolError:
    """The error for a call the user refused; the model must not retry it."""
    message = f"the user denied the call to {tool_name!r}" + (f": {reason}" if reason else ".")
    return ToolError(
        ErrorKind.APPROVAL_DENIED,
        message,
        "Do not repeat this call. Ask the user how to proceed, or choose another approach.",
    )


def append_note(result: ToolResult, note: str) -> ToolResult:
    """Add a line (a loop-guard warning) to the end of `result`'s content."""
    content = result.content
    if isinstance(content, str):
        result.content = f"{content}\n{note}"
    else:
        result.content = [*content, TextBlock(note)]
    return result


def finished_event(outcome: ToolOutcome) -> ToolEvent:
    """The call-finished event of `outcome`, with a one-line detail."""
    if outcome.status is OutcomeStatus.PENDING_APPROVAL:
        detail = "waiting for approval"
    elif outcome.error is not None:
        detail = outcome.error.message.split("\n", 1)[0][:200]
    else:
        detail = f"{text_length(outcome.result)} characters"
    return ToolEvent(
        EventType.CALL_FINISHED,
        outcome.call,
        outcome.status,
        detail,
        outcome.duration,
        outcome,
    )
