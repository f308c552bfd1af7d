"""What a run leaves behind: the stop reason, the calls waiting for approval, the decisions
that answer them, and the JSON state that resumes a run in another process.

A `PendingCall` carries the digest of the validated arguments the user was shown;
`ApprovalDecision` repeats it, so a decision approves exactly that call and nothing
else: a call whose arguments changed since needs a new decision. A pending call with
``retry`` set was interrupted by a crash (it may have partly run): approving it runs
it once more, denying it sends its ``interrupted`` error to the model.
"""

from __future__ import annotations

import enum
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolbridge.agent.messages import (
    Message,
    ToolReturn,
    Usage,
    message_from_json,
    message_to_json,
)
from toolbridge.core.calls import ToolCallRequest
from toolbridge.core.tool import ToolResult
from toolbridge.execution.approval import (
    BY_DECISION,
    ApprovalRequest,
    arguments_digest,
    canonical_arguments,
)
from toolbridge.execution.outcomes import OutcomeStatus, ToolOutcome

__all__ = [
    "STATE_VERSION",
    "ApprovalDecision",
    "PendingCall",
    "RunState",
    "StopReason",
]

STATE_VERSION = 1


class StopReason(enum.StrEnum):
    """Why a run ended; every run ends with one."""

    FINAL = "final"
    """The model answered without calling a tool."""
    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_TOKENS = "max_tokens"
    """A turn was cut off by the provider's output limit; its calls were not run."""
    TOKEN_BUDGET = "token_budget"
    """The run used more tokens than `max_total_tokens`."""
    DEADLINE = "deadline"
    APPROVAL_REQUIRED = "approval_required"
    """Calls wait for the user: resume with decisions."""
    TOOL_ERROR = "tool_error"
    """A call failed under ``fail_on_tool_error``."""
    OUTPUT_INVALID = "output_invalid"
    """The model's structured answer failed validation more than `output_retries` times."""


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """The user's answer to one `PendingCall`; deny with a `reason` the model will read.

    `by` names who decided (``"user:alice"``, ``"hook:audit"`` ...); the journal keeps it
    with the call an approval let run.
    """

    call_id: str
    digest: str
    approved: bool
    reason: str = ""
    by: str = BY_DECISION

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "digest": self.digest,
            "approved": self.approved,
            "reason": self.reason,
            "by": self.by,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalDecision:
        """A decision as `to_json` wrote it; anything else is a `ValueError` naming the field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored decision must be an object, got {type(data).__name__}")
        missing = [key for key in ("call_id", "digest", "approved") if key not in data]
        if missing:
            raise ValueError(f"a stored decision lacks {', '.join(missing)}")
        approved = data["approved"]
        if not isinstance(approved, bool):  # bool("false") is True: never guess a yes
            raise ValueError(
                f"a stored decision's 'approved' must be true or false, got {approved!r}"
            )
        return cls(
            str(data["call_id"]),
            str(data["digest"]),
            approved,
            str(data.get("reason", "")),
            str(data.get("by") or BY_DECISION),
        )


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call that waits for approval: the model's call, the validated arguments the
    user should see, and their digest (what a decision is bound to). With `retry`, the
    call was interrupted by a crash and may have partly run: the decision is whether to
    run it again."""

    call: ToolCallRequest
    tool_name: str
    arguments: Mapping[str, Any]
    digest: str
    retry: bool = False

    @classmethod
    def from_request(cls, call: ToolCallRequest, request: ApprovalRequest) -> PendingCall:
        arguments = json.loads(canonical_arguments(request.arguments))
        return cls(call, request.tool_name, arguments, request.digest, request.retry)

    def approve(self, *, by: str = BY_DECISION) -> ApprovalDecision:
        return ApprovalDecision(self.call.id, self.digest, True, by=by)

    def deny(self, reason: str = "", *, by: str = BY_DECISION) -> ApprovalDecision:
        return ApprovalDecision(self.call.id, self.digest, False, reason, by)

    def request(self) -> ApprovalRequest:
        """The executor's approval request for this call."""
        return ApprovalRequest(
            self.call.id, self.tool_name, self.arguments, self.digest, retry=self.retry
        )

    def outcome(self) -> ToolOutcome:
        """The pending outcome the executor gave for this call, rebuilt (what
        `ToolExecutor.approve` / `deny` take)."""
        text = f"The call to {self.tool_name!r} needs the user's approval and has not run yet."
        return ToolOutcome(
            self.call, OutcomeStatus.PENDING_APPROVAL, ToolResult(text), approval=self.request()
        )


def _pending_to_json(pending: PendingCall) -> dict[str, Any]:
    return {
        "call_id": pending.call.id,
        "tool_name": pending.tool_name,
        "arguments": pending.arguments,
        "digest": pending.digest,
        "retry": pending.retry,
    }


@dataclass(slots=True)
class RunState:
    """Everything needed to continue a run: the conversation, the paused turn's settled
    results and pending calls, and the counters the budgets apply to.

    `to_json` / `from_json` give plain JSON; pass the state back to
    `AgentRunner.stream` / `run` (with `decisions=` when calls are pending).
    """

    conversation: list[Message]
    pending: list[PendingCall] = field(default_factory=list)
    settled: list[ToolReturn] = field(default_factory=list)
    turns: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    id_salt: str = field(default_factory=lambda: secrets.token_hex(8))
    """Mixed into the call ids toolbridge generates for providers that send none (Gemini,
    Ollama), so two conversations never share an id (a journal answers a known id with its
    stored result); kept in the state so a resumed run generates the same ids."""
    prompts: list[str] = field(default_factory=list)
    """User messages that wait for the last turn to be answered (a prompt sent to a session
    whose run was paused or cut off mid-turn); they join the conversation once it is."""
    active_tools: list[str] = field(default_factory=list)
    """Deferred tools a ``tool_search`` found, in the order found: every later request of
    the run sends them after the loaded tools (`toolbridge.core.tool_search`)."""

    def copy(self) -> RunState:
        """A copy whose lists can change without changing this state's."""
        return RunState(
            list(self.conversation),
            list(self.pending),
            list(self.settled),
            self.turns,
            self.tool_calls,
            self.usage,
            self.id_salt,
            list(self.prompts),
            list(self.active_tools),
        )

    def unanswered(self) -> list[ToolCallRequest]:
        """The calls of the last assistant turn that have no result yet and wait for no
        decision: a state saved after the model's turn and before its results (a journaled
        run that crashed there) resumes by running them."""
        from toolbridge.agent.messages import AssistantMessage

        last = self.conversation[-1] if self.conversation else None
        if not isinstance(last, AssistantMessage) or not last.calls:
            return []
        done = {ret.call.id for ret in self.settled}
        done.update(pending.call.id for pending in self.pending)
        return [call for call in last.calls if call.id not in done]

    def to_json(self, *, cache: JsonCache | None = None) -> dict[str, Any]:
        """The state as plain JSON data (``json.dumps`` it to store it).

        With `cache` (kept by the caller between calls), a message already converted is
        not converted again: saving a run at every turn then costs the new messages only.
        The data returned shares the cached parts: read it, do not change it.
        """
        from toolbridge.agent.messages import ToolResultsMessage

        settled = message_to_json(ToolResultsMessage(tuple(self.settled)))["results"]
        if cache is None:
            conversation = [message_to_json(message) for message in self.conversation]
        else:
            conversation = [_cached_json(message, cache) for message in self.conversation]
        return {
            "version": STATE_VERSION,
            "conversation": conversation,
            "pending": [_pending_to_json(pending) for pending in self.pending],
            "settled": settled,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "usage": self.usage.to_json(),
            "id_salt": self.id_salt,
            "prompts": list(self.prompts),
            "active_tools": list(self.active_tools),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> RunState:
        """A state from `to_json`'s data or its JSON text; ValueError names what is off.

        A saved state may have been edited: any field of the wrong type or missing is
        that ValueError too, never an error from deep inside the parsing.
        """
        try:
            return cls._from_json(data)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, KeyError):
                detail = f"the field {exc} is missing"
            elif isinstance(exc, ValueError):
                detail = str(exc)
            else:
                detail = f"a field has the wrong type ({exc})"
            raise ValueError(f"cannot read the saved run state: {detail}") from None

    @classmethod
    def _from_json(cls, data: Mapping[str, Any] | str) -> RunState:
        from toolbridge.agent.messages import AssistantMessage, ToolResultsMessage

        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping) or data.get("version") != STATE_VERSION:
            version = data.get("version") if isinstance(data, Mapping) else None
            raise ValueError(
                f"not a toolbridge run state of version {STATE_VERSION} (got version "
                f"{version!r}); save states with RunState.to_json()"
            )
        conversation = [message_from_json(item) for item in _list(data, "conversation")]
        settled = _list(data, "settled", required=False)
        settled_message = message_from_json({"role": "tool", "results": settled})
        assert isinstance(settled_message, ToolResultsMessage)
        calls: dict[str, ToolCallRequest] = {}
        if conversation and isinstance(conversation[-1], AssistantMessage):
            calls = {call.id: call for call in conversation[-1].calls}
        pending = []
        for item in _list(data, "pending", required=False):
            call = calls.get(str(item["call_id"]))
            if call is None:
                raise ValueError(
                    f"pending call {item['call_id']!r} is not a call of the conversation's "
                    "last assistant message; the state was edited or truncated"
                )
            tool_name, arguments, digest = item["tool_name"], item["arguments"], item["digest"]
            # The user decides on the arguments shown; the executor runs what the digest
            # names. They must agree, or an edited state shows one call and runs another.
            if not isinstance(arguments, Mapping) or digest != arguments_digest(
                str(tool_name), arguments
            ):
                raise ValueError(
                    f"pending call {item['call_id']!r}: its digest is not the digest of the "
                    "arguments it shows; the state was edited, so it is not resumed"
                )
            retry = item.get("retry", False)
            if not isinstance(retry, bool):  # bool("false") is True: never guess a retry
                raise ValueError(
                    f"pending call {item['call_id']!r}: 'retry' must be true or false, "
                    f"got {retry!r}"
                )
            pending.append(PendingCall(call, str(tool_name), arguments, str(digest), retry))
        return cls(
            conversation,
            pending,
            list(settled_message.results),
            _count(data, "turns"),
            _count(data, "tool_calls"),
            _usage(data.get("usage", {})),
            # A state saved before salts existed keeps the ids it generated then.
            str(data.get("id_salt", "")),
            _prompts(data.get("prompts", [])),
            _tool_names(data.get("active_tools", [])),
        )


def _list(data: Mapping[str, Any], key: str, *, required: bool = True) -> list[Any]:
    """The list stored under `key` (empty when an optional one is absent)."""
    if key not in data and not required:
        return []
    value = data[key]
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a list, got {type(value).__name__}")
    return value


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key!r} must be a count (an integer >= 0), got {value!r}")
    return value


def _usage(value: Any) -> Usage:
    if not isinstance(value, Mapping) or not all(
        isinstance(count, int) and not isinstance(count, bool) for count in value.values()
    ):
        raise ValueError(f"'usage' must be an object of token counts, got {value!r}")
    return Usage.from_json(value)


def _prompts(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"a run state's 'prompts' must be a list of strings, got {value!r}")
    return value


def _tool_names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(
            f"a run state's 'active_tools' must be a list of tool names, got {value!r}"
        )
    return value


JsonCache = dict[int, tuple[Message, dict[str, Any]]]
"""Messages already converted by `RunState.to_json`, by identity (messages are frozen)."""


def _cached_json(message: Message, cache: JsonCache) -> dict[str, Any]:
    hit = cache.get(id(message))
    if hit is not None and hit[0] is message:
        return hit[1]
    data = message_to_json(message)
    cache[id(message)] = (message, data)
    return data


def decisions_by_call(
    decisions: Sequence[ApprovalDecision] | Mapping[str, ApprovalDecision],
) -> dict[str, ApprovalDecision]:
    """Decisions keyed by call id (a list or a mapping given)."""
    if isinstance(decisions, Mapping):
        return {str(key): value for key, value in decisions.items()}
    return {decision.call_id: decision for decision in decisions}
