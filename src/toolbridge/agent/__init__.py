"""The agent loop: `AgentRunner` over model adapters that wrap the providers' SDKs.

The conversation is neutral (`toolbridge.agent.messages`) and replays every
provider-opaque item exactly; adapters (`toolbridge.agent.adapters`) take it to each
provider's wire through `toolbridge.formats`; the `ToolExecutor` runs the calls.
"""

from __future__ import annotations

from toolbridge.agent.errors import (
    ContextLengthError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    RateLimitError,
)
from toolbridge.agent.events import (
    AgentEvent,
    ModelEvent,
    ModelResponse,
    ReasoningDelta,
    RunFinished,
    TextDelta,
    ToolCallReady,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from toolbridge.agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultsMessage,
    ToolReturn,
    Usage,
    UserMessage,
    message_from_json,
    message_to_json,
)
from toolbridge.agent.model import (
    ModelAdapter,
    ModelRequest,
    ModelSettings,
    NativeOutput,
    RenderCache,
    render_message,
)
from toolbridge.agent.providers import model_from_string
from toolbridge.agent.result import RunResult
from toolbridge.agent.runner import AgentRunner
from toolbridge.agent.scripted import ScriptedModel
from toolbridge.agent.state import ApprovalDecision, PendingCall, RunState, StopReason
from toolbridge.core.tool_search import DeferralPolicy, ToolSelection

__all__ = [
    "AgentEvent",
    "AgentRunner",
    "ApprovalDecision",
    "AssistantMessage",
    "ContextLengthError",
    "DeferralPolicy",
    "Message",
    "ModelAdapter",
    "ModelAuthenticationError",
    "ModelConnectionError",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ModelRequestError",
    "ModelResponse",
    "ModelResponseError",
    "ModelServerError",
    "ModelSettings",
    "NativeOutput",
    "PendingCall",
    "RateLimitError",
    "ReasoningDelta",
    "RenderCache",
    "RunFinished",
    "RunResult",
    "RunState",
    "ScriptedModel",
    "StopReason",
    "SystemMessage",
    "TextDelta",
    "ToolCallReady",
    "ToolFinished",
    "ToolResultsMessage",
    "ToolReturn",
    "ToolSelection",
    "ToolStarted",
    "TurnFinished",
    "Usage",
    "UserMessage",
    "message_from_json",
    "message_to_json",
    "model_from_string",
    "render_message",
]
