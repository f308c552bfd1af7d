"""`RunResult`: what a finished (or paused) run returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolbridge.agent.messages import AssistantMessage, Message, Usage
from toolbridge.agent.state import PendingCall, RunState, StopReason

__all__ = ["RunResult"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """The run's answer, why it stopped, what it used, and the state to continue from.

    `output` is the text of the last assistant turn. With `stop_reason`
    ``approval_required``, `pending` lists the calls to decide and `state` resumes the
    run (``runner.run(result.state, decisions=[...])``), here or in another process.
    """

    output: str
    stop_reason: StopReason
    conversation: list[Message]
    usage: Usage
    turns: int
    tool_calls: int
    state: RunState
    pending: tuple[PendingCall, ...] = ()
    output_value: Any = None
    """With ``output_type=``: the validated answer (None when the run stopped otherwise)."""

    @property
    def last_message(self) -> AssistantMessage | None:
        for message in reversed(self.conversation):
            if isinstance(message, AssistantMessage):
                return message
        return None
