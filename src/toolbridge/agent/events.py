"""The typed events of a run: what `AgentRunner.stream` yields and adapters produce.

A model adapter yields `TextDelta`, `ReasoningDelta`, `ToolCallReady` while the
turn streams and one `ModelResponse` at its end. The runner passes those through and
adds `ToolStarted` / `ToolFinished` per call, `TurnFinished` per turn and one
`RunFinished` last, which carries the `RunResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from toolbridge.agent.messages import AssistantMessage, Usage
from toolbridge.core.calls import ToolCallRequest
from toolbridge.execution.outcomes import ToolOutcome

if TYPE_CHECKING:
    from toolbridge.agent.result import RunResult

__all__ = [
    "AgentEvent",
    "ModelEvent",
    "ModelResponse",
    "ReasoningDelta",
    "RunFinished",
    "TextDelta",
    "ToolCallReady",
    "ToolFinished",
    "ToolStarted",
    "TurnFinished",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant's answer text, as it streams."""

    text: str
    turn: int = 0
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's visible reasoning (thinking), as it streams."""

    text: str
    turn: int = 0
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A tool call the model finished writing (its arguments are complete)."""

    call: ToolCallRequest
    turn: int = 0
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The end of one model turn: the whole assistant message and its usage."""

    message: AssistantMessage
    usage: Usage
    type: Literal["model_response"] = "model_response"


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A call of this turn is handed to the executor."""

    call: ToolCallRequest
    turn: int
    type: Literal["tool_started"] = "tool_started"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A call's outcome (ok, error, pending approval, ...), in call order."""

    outcome: ToolOutcome
    turn: int
    type: Literal["tool_finished"] = "tool_finished"


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """A model turn and its calls are done; `usage` is this turn's."""

    turn: int
    message: AssistantMessage
    usage: Usage
    type: Literal["turn_finished"] = "turn_finished"


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The last event of every run that did not raise: the result and its stop reason."""

    result: RunResult
    type: Literal["run_finished"] = "run_finished"


ModelEvent = TextDelta | ReasoningDelta | ToolCallReady | ModelResponse
AgentEvent = (
    TextDelta
    | ReasoningDelta
    | ToolCallReady
    | ToolStarted
    | ToolFinished
    | TurnFinished
    | RunFinished
)
